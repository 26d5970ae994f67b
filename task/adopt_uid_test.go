package task

import (
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/coord/local"
	"github.com/etcd-nomad/etcd-nomad/datadir"
	"github.com/etcd-nomad/etcd-nomad/provider"
	"github.com/etcd-nomad/etcd-nomad/provider/static"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// imageUID is the docker image's user, nonroot (tools/image.sh).
const imageUID = 65532

// adoptAsEnv names, for TestAdoptAsAnotherUIDHelper, the data_dir it looks
// at as the member "etcd-new" of cluster "main".
const adoptAsEnv = "ETCD_NOMAD_TEST_ADOPT_AS"

// adoptResult is what TestAdoptAsAnotherUIDHelper reports on its stdout.
type adoptResult struct {
	From, Err           string
	Unreadable          bool
	NewErr              string
	NewUnreadable       bool
	Created             bool // New created the member's own directory
	UID, GID            int
	BlockedUID, Blocked string
}

// TestPredecessorDataOfAnotherUIDStopsTheMember (review of the Docker
// work, session 12, F2; the reviewer's TestRV12AdoptOtherUIDData): a
// cluster moved from raw_exec (members run as root, directories 0700,
// files 0600) to docker (the image runs as uid 65532). The replacement
// member cannot read its predecessor's metadata; it used to skip it
// silently and start empty beside it, so every replacement of the switch
// left a member's data behind. Now adoptPrevious returns an
// *UnreadableDataError naming the path, its owner and mode and the
// member's uid, New returns it without creating the member's directory,
// and docs/install.md's fix (chown -R 65532:65532) lets the member adopt it.
//
// As root (what the machine and CI run as), the member's side runs as uid
// 65532 in a copy of this test binary (TestAdoptAsAnotherUIDHelper); as
// another user, a predecessor directory of mode 0000 is what it cannot
// read.
func TestPredecessorDataOfAnotherUIDStopsTheMember(t *testing.T) {
	base, err := os.MkdirTemp("", "adopt-uid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// data is like Nomad's alloc/data: anyone may create in it; coord is
	// the member's coordination directory, beside it.
	data := filepath.Join(base, "data")
	for _, dir := range []string{data, filepath.Join(base, "coord")} {
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	old := filepath.Join(data, "etcd-old")
	d := datadir.Dir{Root: old}
	if err := d.WriteMeta(datadir.Meta{Cluster: "main", Name: "etcd-old", Token: "tok", Epoch: 1, Stopped: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(old, 0o700); err != nil {
		t.Fatal(err)
	}
	run := adoptHere
	uid, gid := os.Geteuid(), os.Getegid()
	if os.Geteuid() == 0 {
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		run = func(t *testing.T, data string) adoptResult { return adoptAs(t, base, data, imageUID) }
		uid, gid = imageUID, imageUID
	} else {
		// Another user's data, as this user sees it.
		if err := os.Chmod(old, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(old, 0o700) })
	}

	r := run(t, data)
	t.Logf("as uid %d: adopted %q, error %s; New: %s", r.UID, r.From, r.Err, r.NewErr)
	if r.UID != uid {
		t.Fatalf("the member side ran as uid %d, want %d", r.UID, uid)
	}
	if r.From != "" || !r.Unreadable {
		t.Fatalf("adoptPrevious: adopted %q, error %q (an UnreadableDataError: %v); want nothing adopted and an UnreadableDataError", r.From, r.Err, r.Unreadable)
	}
	for _, want := range []string{old, fmt.Sprintf("not readable by this member (uid %d, gid %d)", uid, gid), "owned by uid " + r.BlockedUID, fmt.Sprintf("chown -R %d:%d", uid, gid)} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("adoptPrevious's error does not say %q: %s", want, r.Err)
		}
	}
	if r.Blocked != old {
		t.Errorf("refused at %s, want the predecessor's directory %s", r.Blocked, old)
	}
	if !r.NewUnreadable || !strings.Contains(r.NewErr, old) {
		t.Errorf("New: %q (an UnreadableDataError: %v); want it to stop on the predecessor's data", r.NewErr, r.NewUnreadable)
	}
	if r.Created {
		t.Errorf("New created the member's own directory beside data it cannot read: a member that starts there starts empty")
	}
	if _, err := os.Stat(old); err != nil {
		t.Errorf("the predecessor's data: %v; want it kept", err)
	}

	// The fix docs/install.md gives: the data given to the member's user.
	if os.Geteuid() != 0 {
		if err := os.Chmod(old, 0o700); err != nil {
			t.Fatal(err)
		}
	} else if err := chownR(old, imageUID, imageUID); err != nil {
		t.Fatal(err)
	}
	r = run(t, data)
	if r.From != old || r.Err != "" {
		t.Errorf("after the chown: adopted %q, error %q; want %s adopted", r.From, r.Err, old)
	}
}

// adoptHere runs the member's side in this process.
func adoptHere(t *testing.T, data string) adoptResult {
	t.Helper()
	return adoptSide(data)
}

// adoptAs runs the member's side as uid (and gid) uid in a copy of this
// test binary under base (the build's own directory is root's only).
func adoptAs(t *testing.T, base, data string, uid int) adoptResult {
	t.Helper()
	bin := filepath.Join(base, "task.test")
	if _, err := os.Stat(bin); err != nil {
		if err := copyFile(os.Args[0], bin, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestAdoptAsAnotherUIDHelper$", "-test.count=1")
	cmd.Dir = base
	cmd.Env = append(os.Environ(), adoptAsEnv+"="+data)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "ADOPT "); ok {
			var r adoptResult
			if err := json.Unmarshal([]byte(s), &r); err != nil {
				t.Fatalf("helper's report %q: %v", s, err)
			}
			return r
		}
	}
	t.Fatalf("helper as uid %d: %v, no report:\n%s", uid, err, out)
	return adoptResult{}
}

// TestAdoptAsAnotherUIDHelper is the member's side of
// TestPredecessorDataOfAnotherUIDStopsTheMember, run by it as another uid.
func TestAdoptAsAnotherUIDHelper(t *testing.T) {
	data := os.Getenv(adoptAsEnv)
	if data == "" {
		t.Skip("run by TestPredecessorDataOfAnotherUIDStopsTheMember")
	}
	b, _ := json.Marshal(adoptSide(data))
	fmt.Printf("ADOPT %s\n", b)
}

// adoptSide looks at data as the member etcd-new of cluster main would:
// adoptPrevious, then (when nothing was adopted) New, with TLS off.
func adoptSide(data string) adoptResult {
	r := adoptResult{UID: os.Geteuid(), GID: os.Getegid()}
	root := filepath.Join(data, "etcd-new")
	none := func(string) (bool, bool) { return false, false }
	from, err := adoptPrevious(root, "main", "10.0.0.1", none)
	var u *UnreadableDataError
	r.From, r.Unreadable = from, errors.As(err, &u)
	if err != nil {
		r.Err = err.Error()
	}
	if u != nil {
		r.Blocked, r.BlockedUID = u.Blocked, fmt.Sprint(u.UID)
	}
	if from != "" {
		return r
	}
	self := config.StaticMember{Name: "etcd-new", Address: "10.0.0.1", ClientPort: 2379, PeerPort: 2380, StatusPort: 2381}
	cl := &config.Cluster{Name: "main", Size: 1, DataDir: data, TLS: config.TLS{Mode: config.TLSOff},
		Provider: config.Provider{Kind: config.ProviderStatic, StaleAfter: time.Second, Static: []config.StaticMember{self}}}
	co, err := local.New(filepath.Join(filepath.Dir(data), "coord"))
	if err != nil {
		r.NewErr = err.Error()
		return r
	}
	m, err := New(context.Background(), Options{Cluster: cl, Name: "etcd-new", Provider: static.New(cl.Provider.Static), Coordinator: co,
		Self:   &provider.Instance{Name: self.Name, Address: self.Address, ClientPort: self.ClientPort, PeerPort: self.PeerPort, StatusPort: self.StatusPort},
		Logger: hclog.NewNullLogger()})
	if err != nil {
		r.NewErr, r.NewUnreadable = err.Error(), errors.As(err, &u)
	} else {
		m.halt()
	}
	_, serr := os.Stat(root)
	r.Created = serr == nil
	return r
}

// copyFile copies from to a new file to with mode perm.
func copyFile(from, to string, perm os.FileMode) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// chownR gives dir and everything in it to uid:gid.
func chownR(dir string, uid, gid int) error {
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// TestUnreadableLostFoundIsSkipped (review of the Docker fixes, session
// 13; the reviewer's TestRV13dLostFoundDoesNotStopMember): a host volume on
// a filesystem of its own carries lost+found (root, 0700) beside the
// members' directories. A member of another uid (the docker image's 65532)
// that may not read it used to stop on it as on a predecessor's data: every
// new member of the job, for good. lost+found and hidden names, which no
// member has, are skipped; a readable predecessor beside them is adopted.
func TestUnreadableLostFoundIsSkipped(t *testing.T) {
	base, data := adoptBase(t)
	// Not readable by the member; their metadata even names this cluster.
	var foreign []string
	for _, name := range []string{"lost+found", ".snapshots"} {
		foreign = append(foreign, unreadableSibling(t, data, name))
	}
	run := adoptRunner(t, base, foreign)
	r := run(t, data)
	if r.Unreadable || r.NewUnreadable || r.Err != "" || r.NewErr != "" {
		t.Fatalf("member beside %v: adoptPrevious error %q, New error %q; want it to start (no member is named so)", foreign, r.Err, r.NewErr)
	}
	if !r.Created {
		t.Fatalf("New did not create the member's directory beside %v", foreign)
	}
	for _, dir := range foreign {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s: %v; want it left as it was", dir, err)
		}
	}

	// A readable predecessor beside them is adopted as before.
	if err := os.RemoveAll(filepath.Join(data, "etcd-new")); err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(data, "etcd-old")
	if err := (datadir.Dir{Root: old}).WriteMeta(datadir.Meta{Cluster: "main", Name: "etcd-old", Token: "tok", Epoch: 1, Stopped: true}); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := chownR(old, imageUID, imageUID); err != nil {
			t.Fatal(err)
		}
	}
	r = run(t, data)
	if r.From != old || r.Err != "" {
		t.Errorf("beside %v: adopted %q, error %q; want %s adopted", foreign, r.From, r.Err, old)
	}
}

// TestUnreadablePredecessorOfAnyNameStopsTheMember (review 14, RV14-5; the
// reviewer's TestRV14UnreadablePredecessorOfAnotherNameShapeStopsTheMember):
// a first fix of the lost+found wedge skipped every unreadable sibling not
// named like the member (same text to the last '-', same length); a
// predecessor of this very cluster named after a group renamed in the same
// update that moved the cluster to docker ("members-old" beside
// "etcd-new"), or a static member of another length, was skipped and the
// member started empty beside it. A name says nothing but lost+found's and
// hidden ones: an operator's own directory stops the member too, and the
// error says to move it.
func TestUnreadablePredecessorOfAnyNameStopsTheMember(t *testing.T) {
	for _, pred := range []string{"members-old", "etcd-older", "etcd-ol", "backup-2026"} {
		t.Run(pred, func(t *testing.T) {
			base, data := adoptBase(t)
			old := unreadableSibling(t, data, pred)
			r := adoptRunner(t, base, []string{old})(t, data)
			if r.Created || !r.Unreadable || !r.NewUnreadable {
				t.Fatalf("beside %s (unreadable, cluster main): adopted %q, error %q, New %q, created %v; want it to stop on it", old, r.From, r.Err, r.NewErr, r.Created)
			}
			for _, want := range []string{old, "move it out of the data directory"} {
				if !strings.Contains(r.Err, want) {
					t.Errorf("error does not say %q: %s", want, r.Err)
				}
			}
		})
	}
}

// adoptBase makes base/data (like Nomad's alloc/data: anyone may create in
// it) and base/coord, the member's coordination directory.
func adoptBase(t *testing.T) (base, data string) {
	t.Helper()
	base, err := os.MkdirTemp("", "adopt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	data = filepath.Join(base, "data")
	for _, dir := range []string{data, filepath.Join(base, "coord")} {
		if err := os.Mkdir(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o777); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	return base, data
}

// unreadableSibling writes a cleanly stopped member's metadata of cluster
// main under data/name, mode 0700 (root's, as raw_exec leaves it).
func unreadableSibling(t *testing.T, data, name string) string {
	t.Helper()
	dir := filepath.Join(data, name)
	if err := (datadir.Dir{Root: dir}).WriteMeta(datadir.Meta{Cluster: "main", Name: name, Token: "tok", Epoch: 1, Stopped: true}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// adoptRunner runs the member's side as the docker image's uid when this
// test runs as root; as another user it makes dirs unreadable (mode 0)
// for the test and runs in this process.
func adoptRunner(t *testing.T, base string, dirs []string) func(*testing.T, string) adoptResult {
	t.Helper()
	if os.Geteuid() == 0 {
		if err := os.Chmod(base, 0o755); err != nil {
			t.Fatal(err)
		}
		return func(t *testing.T, data string) adoptResult { return adoptAs(t, base, data, imageUID) }
	}
	for _, dir := range dirs {
		if err := os.Chmod(dir, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o700) })
	}
	return adoptHere
}

// TestMayBeMember: the names no previous member can have.
func TestMayBeMember(t *testing.T) {
	for name, want := range map[string]bool{
		"etcd-9f8e7d6c": true, "members-old": true, "m1": true, "backup": true,
		"lost+found": false, ".trash": false, ".": false,
	} {
		if got := mayBeMember(name); got != want {
			t.Errorf("mayBeMember(%q) = %v, want %v", name, got, want)
		}
	}
}
