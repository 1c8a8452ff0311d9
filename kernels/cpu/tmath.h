// Elementwise math of the hidden-state drafter's trainer. See tmath.c.
double arb_softmax(float *x, int n, double *mean);
void arb_silu_gate(float *s, float *sg, const float *g, const float *u, long n);
