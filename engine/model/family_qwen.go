package model

// qwen2Family is Qwen2 (and Qwen2.5): biases on Q, K and V, NeoX rope.
var qwen2Family = family{
	names:    []string{"qwen2"},
	switches: switches{RopeNeox: true, QKVBias: true},
}

// qwen3Family is Qwen3: RMS norms over each head of Q and K, NeoX rope,
// no biases.
var qwen3Family = family{
	names:    []string{"qwen3"},
	switches: switches{RopeNeox: true, QKNorm: true},
}
