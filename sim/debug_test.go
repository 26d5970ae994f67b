package sim

import "testing"

func TestDebugSeed(t *testing.T) {
	s := seedFromEnv()
	if s == 0 {
		t.Skip("SEED=n")
	}
	r, w := Run(Config{Seed: s, TraceLen: 3000})
	t.Logf("%+v\n%s", r, w.Trace())
}
