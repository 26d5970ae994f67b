package coord_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/etcd-nomad/etcd-nomad/coord"
)

// Values no coordinator writes are refused, not read as a record of
// epoch 0 (json.Unmarshal takes "null" and "{}" without a word).
func TestDecodeRecordRefusesWhatNoWriterProduces(t *testing.T) {
	for _, v := range []string{"", "null", "{}", "[]", `"x"`, "0", `{"token":"t"}`, `{"epoch":1}`, `{"token":"","epoch":3}`, `{"token":"t","epoch":1}x`, `{"token":"t","epoch":-1}`} {
		if r, err := coord.DecodeRecord([]byte(v)); !errors.Is(err, coord.ErrBadRecord) {
			t.Errorf("DecodeRecord(%q) = %+v, %v; want ErrBadRecord", v, r, err)
		}
	}
	r, err := coord.DecodeRecord([]byte(` {"cluster_id":7,"token":"t","epoch":2,"seeder":"m0","index":9,"future":true}`))
	if err != nil || !sameRecord(r, coord.Record{ClusterID: 7, Token: "t", Epoch: 2, Seeder: "m0", Index: 9}) {
		t.Fatalf("DecodeRecord of a valid record: %+v, %v", r, err)
	}
}

// FuzzDecodeRecord: any stored bytes give a record a writer could have
// written or ErrBadRecord, never a panic; what decodes survives a write
// and a read unchanged. Seeds: testdata/fuzz/FuzzDecodeRecord.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"cluster_id":12345,"token":"a1b2","epoch":1,"seeder":"m0","index":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := coord.DecodeRecord(b)
		if err != nil {
			if !errors.Is(err, coord.ErrBadRecord) {
				t.Fatalf("error %v is not ErrBadRecord", err)
			}
			return
		}
		if r.Token == "" || r.Epoch == 0 {
			t.Fatalf("accepted %+v", r)
		}
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %+v: %v", r, err)
		}
		back, err := coord.DecodeRecord(out)
		if err != nil || !sameRecord(back, r) {
			t.Fatalf("round trip of %+v: %+v, %v", r, back, err)
		}
	})
}

// sameRecord compares records field by field (Join: an empty list and none
// are the same record).
func sameRecord(a, b coord.Record) bool {
	if !slices.Equal(a.Join, b.Join) {
		return false
	}
	a.Join, b.Join = nil, nil
	return reflect.DeepEqual(a, b)
}
