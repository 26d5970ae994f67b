package status_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/status"
)

// bodyTransport answers every request with 200 and body, in memory.
type bodyTransport []byte

func (b bodyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(b)), Request: req}, nil
}

// FuzzMemberStatus: whatever a member (or anything on its status port)
// answers to /status, the CLI's reader gives a status or an error naming
// the endpoint, never a panic; a status it reads survives a write and a
// read unchanged and prints. Seeds: testdata/fuzz/FuzzMemberStatus.
func FuzzMemberStatus(f *testing.F) {
	f.Add([]byte(`{"name":"m0","cluster":"c","member_id":1,"cluster_id":2,"epoch":1,"running":true,"leader":true,"healthy":true,"revision":5,"db_size":20480,"decision":"wait","reason":"ok","ca_mismatch":{"member":"sha256:aa","coordinator":"sha256:bb"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		const base = "https://member.invalid:2381"
		hc := &http.Client{Transport: bodyTransport(body)}
		st, err := status.Fetch(context.Background(), hc, base)
		if err != nil {
			if !strings.Contains(err.Error(), base) {
				t.Fatalf("error %q does not name the endpoint", err)
			}
			return
		}
		out, err := json.Marshal(st)
		if err != nil {
			t.Fatalf("marshal %+v: %v", st, err)
		}
		back, err := status.Fetch(context.Background(), &http.Client{Transport: bodyTransport(out)}, base)
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Fatalf("round trip of %+v: %+v, %v", st, back, err)
		}
		table := status.Format(status.Cluster{Cluster: "c", Members: []status.Member{st}})
		if !strings.Contains(table, "NAME") {
			t.Fatalf("table without a header: %q", table)
		}
	})
}
