package clustertest

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
)

// publicKeyer is what every private key type of crypto/* implements.
type publicKeyer interface{ Public() crypto.PublicKey }

// HoldsKeyOf reports whether value holds, in the clear, the private key of
// the PEM certificate certPEM.
func HoldsKeyOf(value, certPEM []byte) bool {
	blk, _ := pem.Decode(certPEM)
	if blk == nil {
		return false
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return false
	}
	type equaler interface{ Equal(crypto.PublicKey) bool }
	for rest := value; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		var key any
		if k, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
			key = k
		} else if k, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
			key = k
		}
		if pk, ok := key.(publicKeyer); ok {
			if pub, ok := pk.Public().(equaler); ok && pub.Equal(cert.PublicKey) {
				return true
			}
		}
	}
}

// NoCAKeyInKV fails the test when any value under prefix in Consul KV
// holds the private key of the CA certificate caCert in the clear, or
// when a value is stored under any of the keys absent.
func NoCAKeyInKV(t testing.TB, kv *consulapi.KV, prefix string, caCert []byte, absent ...string) {
	t.Helper()
	pairs, _, err := kv.List(prefix, nil)
	if err != nil {
		t.Fatalf("list %s: %v", prefix, err)
	}
	var keys []string
	for _, p := range pairs {
		keys = append(keys, p.Key)
		if HoldsKeyOf(p.Value, caCert) {
			t.Errorf("Consul KV %s holds the cluster CA's private key in the clear", p.Key)
		}
		for _, a := range absent {
			if p.Key == a {
				t.Errorf("Consul KV %s is still there (%d bytes)", p.Key, len(p.Value))
			}
		}
	}
	if len(pairs) == 0 {
		t.Errorf("nothing under %s: %s", prefix, fmt.Sprint(keys))
	}
	t.Logf("Consul KV under %s: %v", prefix, keys)
}
