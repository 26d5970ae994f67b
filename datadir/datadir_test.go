package datadir

import "testing"

func TestNewerEtcd(t *testing.T) {
	for _, c := range []struct {
		stored, embedded string
		refused          bool
	}{
		{"3.6.0", "3.6.16", false}, {"3.5.0", "3.6.16", false}, {"", "3.6.16", false}, {"junk", "3.6.16", false},
		{"3.7.0", "3.6.16", true}, {"4.0.0", "3.6.16", true}, {"3.6.0", "3.7.3", false},
	} {
		if got := newerEtcd(c.stored, c.embedded, "/d") != ""; got != c.refused {
			t.Errorf("stored %q embedded %s: refused %v, want %v", c.stored, c.embedded, got, c.refused)
		}
	}
}
