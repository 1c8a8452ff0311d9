// Causal attention of one query head for the hidden-state drafter's
// trainer, forward and backward. See tattn.c.
void arb_tattn_fwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, float *p, float *o, int os);
void arb_tattn_bwd(const float *q, int qs, const float *kT, const float *vT, int r0, int hd, const float *ek,
                   const float *ev, int j, int R, float scale, const float *p, const float *dout, int ds, float *dq,
                   int dqs, float *dkT, float *dvT, float *dek, float *dev, float *dp);
