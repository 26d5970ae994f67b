// Command demo runs the README's main command: real Consul and Nomad dev
// agents, and a 3-member etcd-nomad cluster deployed with `nomad job run`.
//
//	go run ./cmd/demo up   [-dir .demo] [-bin bin/etcd-nomad] [-driver docker -image-bin bin/image/etcd-nomad]
//	go run ./cmd/demo down [-dir .demo]
//
// With -driver docker the members run in containers of an image built from
// -image-bin (static) by tools/image.sh, on a Docker engine of the demo's
// own under the demo dir (devagents.StartDockerDetached), which down stops.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/etcd-nomad/etcd-nomad/backends"
	"github.com/etcd-nomad/etcd-nomad/config"
	"github.com/etcd-nomad/etcd-nomad/internal/clusterdef"
	"github.com/etcd-nomad/etcd-nomad/internal/devagents"
	"github.com/etcd-nomad/etcd-nomad/jobs"
	"github.com/etcd-nomad/etcd-nomad/nomad"
	"github.com/etcd-nomad/etcd-nomad/status"
)

type state struct {
	ConsulPID  int    `json:"consul_pid"`
	NomadPID   int    `json:"nomad_pid"`
	ConsulAddr string `json:"consul_addr"`
	// ConsulDNS is the Consul agent's DNS server, host:port.
	ConsulDNS string `json:"consul_dns"`
	NomadAddr string `json:"nomad_addr"`
	Job       string `json:"job"`
	// AllocDir is the Nomad client's alloc_dir when it is not under the
	// demo dir (devagents moves it to /tmp when the demo dir is too deep
	// for the task API socket's path).
	AllocDir string `json:"alloc_dir,omitempty"`
	// DockerPID and DockerDir are the demo's Docker engine (-driver docker).
	DockerPID int    `json:"docker_pid,omitempty"`
	DockerDir string `json:"docker_dir,omitempty"`
}

// demoImage is the image the members run with -driver docker.
const demoImage = "etcd-nomad:demo"

// definition is the demo's cluster definition; consulHostPort is the
// Consul agent's host:port, which the members use (the dev agent's port
// is not 8500), driverHCL the members' driver lines.
func definition(consulHostPort, driverHCL string) clusterdef.Definition {
	return clusterdef.Definition{
		Header: "The demo cluster: 3 members as a Nomad job, coordinated through Consul.",
		Name:   "demo", Size: 3, StaleAfter: "10s", Prefix: "etcd-nomad",
		Job: "etcd-demo", CPU: 200, MemoryMB: 256,
		Nomad: clusterdef.SingleClient(consulHostPort) + driverHCL,
	}
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: demo up|down [-dir DIR]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".demo", "working directory")
	bin := fs.String("bin", "bin/etcd-nomad", "etcd-nomad binary")
	driver := fs.String("driver", "raw_exec", "the members' task driver: raw_exec or docker")
	imageBin := fs.String("image-bin", "bin/image/etcd-nomad", "with -driver docker: the static (CGO_ENABLED=0) etcd-nomad the image holds")
	_ = fs.Parse(os.Args[2:])
	abs, _ := filepath.Abs(*dir)
	var err error
	switch os.Args[1] {
	case "up":
		switch *driver {
		case "raw_exec":
			*imageBin = ""
		case "docker":
		default:
			err = fmt.Errorf("-driver %q: raw_exec or docker", *driver)
		}
		if err == nil {
			err = up(abs, *bin, *imageBin, os.Stdout)
		}
	case "down":
		err = down(abs, os.Stdout)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func statePath(dir string) string { return filepath.Join(dir, "state.json") }

func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// up starts the demo; with imageBin set, the members run in containers
// of an image of it (driver docker). It writes its steps and what to try,
// every address it names included, to out (the demo test opens each of
// those).
func up(dir, bin, imageBin string, out io.Writer) error {
	if b, err := os.ReadFile(statePath(dir)); err == nil {
		var st state
		if json.Unmarshal(b, &st) == nil && (alive(st.ConsulPID) || alive(st.NomadPID)) {
			return fmt.Errorf("a demo already runs from %s (consul pid %d, nomad pid %d): run `make demo-down` first", dir, st.ConsulPID, st.NomadPID)
		}
	}
	binAbs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	if _, err := os.Stat(binAbs); err != nil {
		return fmt.Errorf("%s: build it with `make build`", binAbs)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	step := func(format string, args ...any) { fmt.Fprintf(out, "==> "+format+"\n", args...) }

	step("starting consul agent -dev")
	consul, err := devagents.StartConsul(ctx, filepath.Join(dir, "consul"))
	if err != nil {
		return err
	}
	var docker *devagents.Docker
	driverLines, render := "", jobs.Options{Binary: binAbs}
	if imageBin != "" {
		step("starting a Docker engine of the demo's own (no iptables, no bridge)")
		if docker, err = devagents.StartDockerDetached(ctx, filepath.Join(dir, "docker")); err != nil {
			_ = consul.Stop(10 * time.Second)
			return err
		}
		step("building image %s from %s (tools/image.sh)", demoImage, imageBin)
		if err := buildImage(docker, imageBin); err != nil {
			_ = consul.Stop(10 * time.Second)
			_ = devagents.StopDockerAt(docker.Dir, docker.PID())
			return err
		}
		driverLines = fmt.Sprintf("\n    driver = \"docker\"\n    image  = %q", demoImage)
		render = jobs.Options{Image: demoImage}
	}
	step("starting nomad agent -dev (raw_exec%s)", map[bool]string{true: ", docker"}[docker != nil])
	nomad, err := devagents.StartNomadWith(ctx, filepath.Join(dir, "nomad"), consul.Addr, devagents.Options{Docker: docker})
	if err != nil {
		_ = consul.Stop(10 * time.Second)
		if docker != nil {
			_ = devagents.StopDockerAt(docker.Dir, docker.PID())
		}
		return err
	}
	st := state{ConsulPID: consul.PID(), NomadPID: nomad.PID(), ConsulAddr: consul.Addr, ConsulDNS: consul.DNSAddr, NomadAddr: nomad.Addr, Job: "etcd-demo"}
	if docker != nil {
		st.DockerPID, st.DockerDir = docker.PID(), docker.Dir
	}
	if !strings.HasPrefix(nomad.AllocDir, dir+"/") {
		st.AllocDir = nomad.AllocDir
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	if err := os.WriteFile(statePath(dir), b, 0o600); err != nil {
		return err
	}
	consulHostPort := strings.TrimPrefix(consul.Addr, "http://")
	os.Setenv("CONSUL_HTTP_ADDR", consulHostPort)
	os.Setenv("NOMAD_ADDR", nomad.Addr)

	defFile := filepath.Join(dir, "cluster.hcl")
	if err := definition(consulHostPort, driverLines).Write(defFile); err != nil {
		return err
	}
	cl, _, diags := config.LoadFile(defFile)
	if diags.HasErrors() {
		return diags
	}
	spec, err := jobs.Render(cl, render)
	if err != nil {
		return err
	}
	jobFile := filepath.Join(dir, "etcd.nomad.hcl")
	if err := os.WriteFile(jobFile, []byte(spec), 0o600); err != nil {
		return err
	}
	nomadBin, err := devagents.Bin("nomad", devagents.NomadVersion)
	if err != nil {
		return err
	}
	ncfg := nomadapi.DefaultConfig()
	ncfg.Address = nomad.Addr
	ncli, err := nomadapi.NewClient(ncfg)
	if err != nil {
		return err
	}
	// What `etcd-nomad job run` does first: the key that seals the
	// cluster CA's key in Consul, in the job's Nomad variable.
	if _, err := jobs.EnsureCAKEK(ctx, ncli, "etcd-demo", ""); err != nil {
		return err
	}
	step("nomad job run %s", jobFile)
	start := time.Now()
	run := exec.Command(nomadBin, "job", "run", "-detach", "-address", nomad.Addr, jobFile)
	run.Stdout, run.Stderr = out, os.Stderr
	if err := run.Run(); err != nil {
		return fmt.Errorf("nomad job run: %w", err)
	}
	if err := nomadglue.Follow(ctx, ncli, "etcd-demo", "", out); err != nil {
		return err
	}
	step("waiting for 3 passing Consul checks")
	ccfg := consulapi.DefaultConfig()
	ccfg.Address = consulHostPort
	ccli, err := consulapi.NewClient(ccfg)
	if err != nil {
		return err
	}
	for {
		entries, _, err := ccli.Health().Service("demo", "", true, nil)
		if err == nil && len(entries) == 3 {
			break
		}
		if ctx.Err() != nil {
			return errors.New("checks did not pass in time")
		}
		time.Sleep(300 * time.Millisecond)
	}
	fmt.Fprintf(out, "\ncluster healthy %.1fs after nomad job run\n\n", time.Since(start).Seconds())
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	defer scancel()
	bc, err := backends.OpenClient(cl)
	if err != nil {
		return err
	}
	cs, err := status.Gather(sctx, bc)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, status.Format(cs))
	var eps []string
	for _, m := range cs.Members {
		eps = append(eps, m.ClientURL)
	}
	etcdctl, err := devagents.Bin("etcdctl", devagents.EtcdctlVersion)
	if err != nil {
		etcdctl = "etcdctl"
	}
	fmt.Fprintf(out, `
etcd endpoints: %s
Nomad job:      NOMAD_ADDR=%s %s job status etcd-demo
Nomad UI:       %s/ui/jobs/etcd-demo@default
Consul UI:      %s/ui/dc1/services/demo
cluster summary in Consul KV: etcd-nomad/demo/summary
Consul DNS:     demo.service.consul (SRV _demo._tcp.service.consul) on %s

Try it:
  export NOMAD_ADDR=%s CONSUL_HTTP_ADDR=%s
  %s status -config %s
  %s alloc status   # then: nomad alloc stop <id>, and watch a replacement join

Talk to etcd (endpoints from Consul, a 1-hour root client certificate):
  %s
  %s member list -w table

Stop everything: make demo-down
`, strings.Join(eps, ","), nomad.Addr, nomadBin, nomad.Addr, consul.Addr, consul.DNSAddr, nomad.Addr, consulHostPort, bin, defFile, nomadBin+" job status etcd-demo; "+nomadBin,
		evalLine(st, bin, defFile), etcdctl)
	return nil
}

// evalLine is the shell line that gives etcdctl the demo cluster's
// endpoints and an operator certificate (the demo test runs it).
func evalLine(st state, bin, defFile string) string {
	return fmt.Sprintf("export NOMAD_ADDR=%s CONSUL_HTTP_ADDR=%s && eval $(%s env -config %s)",
		st.NomadAddr, strings.TrimPrefix(st.ConsulAddr, "http://"), bin, defFile)
}

// buildImage builds demoImage from bin into the demo's engine with `make
// image`'s script, found in the module's tools/ above the working
// directory.
func buildImage(d *devagents.Docker, bin string) error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "image.sh")); err == nil {
			break
		}
		if filepath.Dir(dir) == dir {
			return errors.New("tools/image.sh not found above the working directory: run the demo from the etcd-nomad clone")
		}
		dir = filepath.Dir(dir)
	}
	return d.BuildImage(context.Background(), filepath.Join(dir, "tools", "image.sh"), bin, demoImage, "")
}
