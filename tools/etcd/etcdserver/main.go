// Command etcd is the plain etcd server of the embedded version (3.6.16), built from etcd's own server
// module (pinned in go.mod) for the migrate-in tests: a running cluster
// outside etcd-nomad that etcd-nomad members join. It is etcd's own main.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
