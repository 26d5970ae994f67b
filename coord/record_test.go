package coord_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
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

// The record's JSON is what members of other releases read and write: a
// record as today's coordinators store it (coord/local: indented, with
// its index; coord/consul: compact, index 0) and one a member of the
// release before highest_epoch (c7d7bf6) stored decode and encode back
// byte for byte. The fixtures were written by those releases' own
// coordinators (coord/local's CreateRecord; consul's json.Marshal), not
// by this test.
func TestRecordJSONIsTheStoredOneByteForByte(t *testing.T) {
	files, err := filepath.Glob("testdata/record/*.json")
	if err != nil || len(files) < 6 {
		t.Fatalf("record fixtures: %v, %v", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			stored, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			r, err := coord.DecodeRecord(stored)
			if err != nil {
				t.Fatal(err)
			}
			var back []byte
			if strings.HasSuffix(f, "-local.json") {
				back, err = json.MarshalIndent(r, "", "  ")
			} else {
				back, err = json.Marshal(r)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, stored) {
				t.Fatalf("encoded back:\n%s\nstored:\n%s", back, stored)
			}
		})
	}
}

// Every field of the record is on the wire: a fixture sets each one, so a
// field added without a JSON name, or renamed, fails the byte-equal test
// above or this one.
func TestRecordFixtureSetsEveryField(t *testing.T) {
	stored, err := os.ReadFile("testdata/record/today-full-local.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := coord.DecodeRecord(stored)
	if err != nil {
		t.Fatal(err)
	}
	v := reflect.ValueOf(r)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("today-full-local.json leaves %s unset", v.Type().Field(i).Name)
		}
	}
}
