package task

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-nomad/etcd-nomad/snapshot"
)

// Third security review (rev13b): the names of refused objects a member
// logged once were kept for the life of the process, only ever added to.
// A store writer who plants refused objects under new names and removes
// them again grows every member without bound. The set is rebuilt from
// each listing: what is no longer listed is forgotten.
func TestRefusedNamesAreForgottenOnceGone(t *testing.T) {
	f := newAuthFixture(t, func(e snapshot.Encryption) snapshot.Encryption { return e })
	ctx := context.Background()
	var planted []string
	for i := range 50 {
		name := snapshot.ObjectName(f.k.cl.Name, 1, int64(1000+i), time.Now().UTC(), false)
		planted = append(planted, name)
		if err := os.WriteFile(filepath.Join(f.dir, name+".meta.json"), []byte(fmt.Sprintf("{garbage %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		if _, _, err := f.m.listSplit(ctx); err != nil {
			t.Fatal(err)
		}
		return f.m.backups.RefusedNames()
	}
	if n := count(); n < len(planted) {
		t.Fatalf("%d refused names remembered with %d planted objects listed", n, len(planted))
	}
	for _, name := range planted {
		if err := os.Remove(filepath.Join(f.dir, name+".meta.json")); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(); n != 0 {
		t.Fatalf("%d refused names still remembered after the planted objects are gone: the set only grows", n)
	}
}
