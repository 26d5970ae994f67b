// Package tier names the two tiers of this repository's tests and lets every
// TestMain and test honour them the same way.
//
//   - The short tier (go test -short, `make check`, the race pass of `make
//     test`) starts no external process: no Consul or Nomad agent, no S3
//     server, no etcd-nomad binary built and run as a member. Tests that need
//     one skip, saying what they would start.
//   - The full tier (plain go test, `make test`) runs every test.
//
// It must never decide anything but whether to start processes: a test that
// runs in both tiers runs the same way in both.
package tier
