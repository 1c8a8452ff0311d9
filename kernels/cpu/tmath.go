package cpu

import "math"

// Softmax replaces x by softmax(x) and returns log sum exp(x) and
// sum softmax(x)_i x_i (so a distribution's sum p log p is mean - lse with
// no logarithm per entry): the trainer's loss rows. Sums in float64.
func Softmax(x []float32) (lse, mean float64) {
	if len(x) == 0 {
		return math.Inf(-1), 0
	}
	return softmax(x)
}

// SiLUGate writes sg = sigmoid(g) and s = g * sg * u for the trainer's
// feed-forward block, keeping the sigmoid for the backward pass.
func SiLUGate(s, sg, g, u []float32) {
	if len(s) < len(g) || len(sg) < len(g) || len(u) < len(g) {
		panic("cpu: SiLUGate with short slices")
	}
	if len(g) == 0 {
		return
	}
	siluGate(s, sg, g, u)
}

// softmaxGo is Softmax in Go: the fallback without cgo and the tests'
// reference.
func softmaxGo(x []float32) (lse, mean float64) {
	mx := float32(math.Inf(-1))
	for _, v := range x {
		mx = max(mx, v)
	}
	var sum, ez float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		sum += e
		ez += e * float64(v)
		x[i] = float32(e)
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
	return float64(mx) + math.Log(sum), ez / sum
}

// siluGateGo is SiLUGate in Go.
func siluGateGo(s, sg, g, u []float32) {
	for i, x := range g {
		v := float32(1 / (1 + math.Exp(float64(-x))))
		sg[i] = v
		s[i] = x * v * u[i]
	}
}
