package profiles

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"arborist/kernels"
	"arborist/profiles/hardware"
	"arborist/profiles/store"
)

// benchKV is the KV cache type as a stored report's key names it: ""
// and "f32" are one type (kernels.ParseKV), so both read "f32".
func benchKV(kv string) (string, error) {
	t, err := kernels.ParseKV(strings.ToLower(strings.TrimSpace(kv)))
	if err != nil {
		return "", err
	}
	return strings.ToLower(t.String()), nil
}

// SaveBenchReport keeps r, a report BenchModel made, as its model's newest
// speed at depth on this machine (per backend and KV cache type), so the
// workbench shows it again when the pair is chosen later, in another
// session too. A newer measurement replaces it.
func (b *Bench) SaveBenchReport(ctx context.Context, r *BenchReport) error {
	if r.identity == nil {
		return fmt.Errorf("the bench report of %s was not measured here (no model fingerprint)", r.Model)
	}
	kv, err := benchKV(r.KV)
	if err != nil {
		return err
	}
	st, err := b.db(ctx)
	if err != nil {
		return err
	}
	hw := hardware.DetectHardware()
	hid, err := st.PutHardware(ctx, &hw)
	if err != nil {
		return err
	}
	md := *r.identity
	mid, err := st.PutModel(ctx, &md)
	if err != nil {
		return err
	}
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return st.PutBenchReport(ctx, store.BenchReport{Key: store.BenchKey{HardwareID: hid, ModelID: mid, Backend: r.Backend, KV: kv}, Threads: r.Threads, Report: string(js)})
}

// storedBench is the newest stored bench report of a model on a machine
// for a backend and KV cache type, and when it was stored; nil when none
// is, or when what is stored does not read as a report (a pair's state
// is read without it then, as before any measurement).
func storedBench(ctx context.Context, st *store.Store, hardwareID, modelID int64, backend, kv string) (*BenchReport, time.Time, error) {
	key, err := benchKV(kv)
	if err != nil {
		return nil, time.Time{}, nil // a pair that names no known type has no report
	}
	sr, ok, err := st.BenchReportOf(ctx, store.BenchKey{HardwareID: hardwareID, ModelID: modelID, Backend: backend, KV: key})
	if err != nil || !ok {
		return nil, time.Time{}, err
	}
	r := new(BenchReport)
	if json.Unmarshal([]byte(sr.Report), r) != nil || len(r.Decode) == 0 {
		return nil, time.Time{}, nil
	}
	r.KV = kv
	return r, sr.Created, nil
}
