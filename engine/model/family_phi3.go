package model

// phi3Family is Phi-3: NeoX rope, Q, K and V fused in attn_qkv (gate and
// up fused in ffn_up, found by the missing ffn_gate as for any family),
// longrope factors (read by ReadConfig for every family), and a sliding
// window that its files always carry.
var phi3Family = family{
	names:    []string{"phi3"},
	switches: switches{RopeNeox: true},
	fusedQKV: true,
	after: func(m meta, c *Config) error {
		if c.Window == 0 {
			return m.bad("attention.sliding_window (phi3 files carry it)")
		}
		return nil
	},
}
