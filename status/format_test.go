package status

import (
	"strings"
	"testing"
	"time"
)

// status names the certificate that expires first across members, and
// each member's certificate warning.
func TestFormatShowsEarliestCertificateExpiry(t *testing.T) {
	soon := time.Now().Add(48 * time.Hour).UTC()
	out := Format(Cluster{Cluster: "c", Members: []Member{
		{Name: "m0", CertName: "member", CertExpiry: time.Now().Add(300 * 24 * time.Hour).UTC().Format(time.RFC3339)},
		{Name: "m1", CertName: "ca", CertExpiry: soon.Format(time.RFC3339), CertWarning: "certificate ca expires soon"},
		{Name: "m2"},
	}})
	if want := "the first to expire is m1's ca at " + soon.Format(time.RFC3339); !strings.Contains(out, want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
	if want := "m1: CERTIFICATE WARNING: certificate ca expires soon"; !strings.Contains(out, want) {
		t.Errorf("status lacks %q:\n%s", want, out)
	}
}

// status says once that the cluster refuses writes under an alarm, and
// which members a CORRUPT alarm names; a cluster without alarms says
// nothing of them.
func TestFormatShowsAlarms(t *testing.T) {
	out := Format(Cluster{Cluster: "c", Members: []Member{
		{Name: "m0", NoSpace: true, Corrupt: []string{"a1"}},
		{Name: "m1", NoSpace: true, Corrupt: []string{"a1"}},
	}})
	for _, want := range []string{"ALARM NOSPACE (seen by m0)", "ALARM CORRUPT for member(s) a1 (seen by m0)"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("status should say %q once:\n%s", want, out)
		}
	}
	if quiet := Format(Cluster{Cluster: "c", Members: []Member{{Name: "m0"}}}); strings.Contains(quiet, "ALARM") {
		t.Errorf("no alarm raised, but:\n%s", quiet)
	}
}

// status shows the record's highest_epoch when set (review rev14b D3: a
// planted one was invisible), and says nothing of it otherwise.
func TestFormatShowsHighestEpoch(t *testing.T) {
	if out := Format(Cluster{Cluster: "c", Epoch: 2, HighestEpoch: 3}); !strings.Contains(out, "highest_epoch 3") {
		t.Errorf("status lacks the record's highest_epoch:\n%s", out)
	}
	if out := Format(Cluster{Cluster: "c", Epoch: 2}); strings.Contains(out, "highest_epoch") {
		t.Errorf("no highest_epoch set, but:\n%s", out)
	}
}
