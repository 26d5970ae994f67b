package config

import (
	"bytes"
	"strings"
	"testing"
)

const accessBase = `cluster "x" {
  provider "nomad" {}
  coordination "consul" {}
%s
}
`

func loadAccess(t *testing.T, block string) (*Cluster, string, int) {
	t.Helper()
	c, res, diags := Load("x.hcl", []byte(strings.Replace(accessBase, "%s", block, 1)))
	var buf bytes.Buffer
	if err := res.WriteDiagnostics(&buf, diags); err != nil {
		t.Fatal(err)
	}
	return c, buf.String(), len(diags.Errs())
}

func TestAccessBlockDecodes(t *testing.T) {
	c, out, n := loadAccess(t, `
  access {
    role "billing" {
      read_write = ["/billing/"]
      read       = ["/config/"]
    }
    role "audit" {
      read = ["/"]
    }
    user "billing-api" {
      roles      = ["billing", "audit"]
      nomad_jobs = ["billing", "prod/billing-worker"]
    }
  }`)
	if n != 0 {
		t.Fatalf("errors:\n%s", out)
	}
	a := c.Access
	if a == nil || len(a.Roles) != 2 || len(a.Users) != 1 {
		t.Fatalf("access %+v", a)
	}
	if r := a.Roles[0]; r.Name != "billing" || r.ReadWrite[0] != "/billing/" || r.Read[0] != "/config/" || len(r.Write) != 0 {
		t.Errorf("role %+v", r)
	}
	if u := a.User("billing-api"); u == nil || strings.Join(u.Roles, ",") != "billing,audit" {
		t.Errorf("user %+v", u)
	}
	if u := a.UserForJob("", "billing"); u == nil || u.Name != "billing-api" {
		t.Errorf("job billing in namespace default: %+v", u)
	}
	if u := a.UserForJob("prod", "billing-worker"); u == nil {
		t.Errorf("job prod/billing-worker not mapped")
	}
	if u := a.UserForJob("default", "billing-worker"); u != nil {
		t.Errorf("job billing-worker of namespace default mapped to %s: only prod's is", u.Name)
	}
	if a.CertificateTTL != DefaultCertificateTTL {
		t.Errorf("certificate_ttl %s, want the default %s", a.CertificateTTL, DefaultCertificateTTL)
	}
	if c2, _, _ := loadAccess(t, ""); c2.Access != nil {
		t.Errorf("no access block gives %+v, want nil (etcd's auth left alone)", c2.Access)
	}
}

// Bad rules are refused at their own line: unknown role, duplicate names,
// the reserved root, a prefix granted twice, one Nomad job for two users.
func TestAccessBlockRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        []string
	}{
		{"unknown role", `
  access {
    role "billing" {
      read_write = ["/billing/"]
    }
    user "api" {
      roles = ["billing", "bliling"]
    }
  }`, []string{`x.hcl:10:15: error: Unknown role`, `names role "bliling", which no role block declares (declared: "billing")`}},
		{"duplicate role", `
  access {
    role "a" {
      read = ["/a/"]
    }
    role "a" {
      read = ["/b/"]
    }
  }`, []string{`x.hcl:9:5: error: Duplicate role`}},
		{"duplicate user", `
  access {
    user "u" {}
    user "u" {}
  }`, []string{`x.hcl:7:5: error: Duplicate user`}},
		{"reserved root", `
  access {
    role "root" {}
    user "root" {}
  }`, []string{`x.hcl:6:5: error: Reserved role name`, `x.hcl:7:5: error: Reserved user name`}},
		{"root role granted", `
  access {
    user "u" {
      roles = ["root"]
    }
  }`, []string{`x.hcl:7:15: error: Root role not grantable`}},
		{"prefix twice", `
  access {
    role "a" {
      read_write = ["/a/"]
      read       = ["/a/"]
    }
  }`, []string{`x.hcl:8:20: error: Prefix granted twice`}},
		{"empty prefix", `
  access {
    role "a" {
      read = [""]
    }
  }`, []string{`x.hcl:7:14: error: Empty key prefix`}},
		{"job twice", `
  access {
    user "a" {
      nomad_jobs = ["app"]
    }
    user "b" {
      nomad_jobs = ["default/app"]
    }
  }`, []string{`x.hcl:10:20: error: Nomad job mapped twice`}},
		{"own job", `
  access {
    user "a" {
      nomad_jobs = ["x"]
    }
  }`, []string{`error: The cluster's own job mapped to a user`}},
		{"bad name", `
  access {
    user "a b" {}
  }`, []string{`x.hcl:6:5: error: Invalid user name`}},
		{"ttl too short", `
  access {
    certificate_ttl = "1s"
  }`, []string{`x.hcl:6:23: error: Invalid certificate_ttl`}},
		{"tls off", `
  tls {
    mode = "off"
  }
  access {}`, []string{`x.hcl:8:3: error: Access rules need TLS auto`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, out, n := loadAccess(t, tc.block)
			if c != nil || n == 0 {
				t.Fatalf("accepted:\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
