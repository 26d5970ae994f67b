package certs

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// The peer CA: the only CA etcd's peer port trusts (docs/security.md, threat model). Every
// certificate the cluster CA signs (members' client-port certificates,
// root clients of the members and of `env`, `status`, `snapshot`, and the
// applications' certificates from the exchange) would otherwise be
// accepted on the peer port, where raft itself is spoken: an application
// could forge raft messages. Member peer certificates come from a CA of
// their own instead, which nothing else issues from.
//
// Its key is derived from the cluster CA's key (HKDF, like the status
// CA's), and its certificate is self-signed with Ed25519, whose
// signatures are deterministic: every member holding the cluster CA
// computes byte for byte the same peer CA, with no state of its own in
// the coordinator and nothing to distribute. Its key never leaves this
// package: callers get its certificate (PeerCACert), certificates it
// issues for members (IssuePeer), and the cross certificate a CA rotation
// needs (PeerCross). It does not chain to the cluster CA, so a member's
// peer certificate is no client certificate on the client port either.

// PeerCN is the common name of every member's peer certificate; the peer
// port accepts no other (etcd's AllowedCNs), as a second lock.
const PeerCN = "etcd-nomad peer"

// peerCA derives the peer CA of the cluster CA ca.
func peerCA(ca Pair) (ed25519.PrivateKey, *x509.Certificate, error) {
	blk, _ := pem.Decode(ca.Key)
	if blk == nil {
		return nil, nil, errors.New("peer CA: no cluster CA key")
	}
	caCert, err := x509.ParseCertificate(certDER(ca.Cert))
	if err != nil {
		return nil, nil, fmt.Errorf("peer CA: cluster CA certificate: %w", err)
	}
	seed, err := hkdf.Key(sha256.New, blk.Bytes, nil, "etcd-nomad peer CA v1", ed25519.SeedSize)
	if err != nil {
		return nil, nil, err
	}
	key := ed25519.NewKeyFromSeed(seed)
	sn := sha256.Sum256(append([]byte("etcd-nomad peer CA serial\x00"), key.Public().(ed25519.PublicKey)...))
	tmpl := &x509.Certificate{
		SerialNumber:          new(big.Int).SetBytes(sn[:16]),
		Subject:               pkix.Name{CommonName: "etcd-nomad peer CA for " + caCert.Subject.CommonName, Organization: []string{"etcd-nomad"}},
		NotBefore:             caCert.NotBefore,
		NotAfter:              caCert.NotAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(bytes.NewReader(nil), tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("peer CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return key, cert, nil
}

// PeerCACert returns, PEM, the certificate of the peer CA of the cluster
// CA ca: what the peer port trusts.
func PeerCACert(ca Pair) ([]byte, error) {
	_, cert, err := peerCA(ca)
	if err != nil {
		return nil, err
	}
	return pemCertificate(cert.Raw), nil
}

// IssuePeer issues a member's peer certificate from the peer CA of the
// cluster CA ca: CN PeerCN, server and client use, the hosts as SANs,
// valid for validity (capped by the CA's expiry).
func IssuePeer(ca Pair, hosts []string, now time.Time, validity time.Duration) (Pair, error) {
	if validity <= 0 {
		return Pair{}, fmt.Errorf("peer certificate: validity %s is not positive", validity)
	}
	key, cert, err := peerCA(ca)
	if err != nil {
		return Pair{}, err
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	peer := Pair{Cert: pemCertificate(cert.Raw), Key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})}
	return issue(peer, PeerCN, hosts, now, validity)
}

// PeerCross returns, PEM, the peer CA of next certified by the peer CA of
// prev: what members present after peer certificates of next's peer CA
// during a CA rotation, for peers whose etcd loaded only prev's. Like
// the peer CAs themselves, it is the same bytes wherever it is computed.
func PeerCross(prev, next Pair) ([]byte, error) {
	prevKey, prevCert, err := peerCA(prev)
	if err != nil {
		return nil, err
	}
	_, nextCert, err := peerCA(next)
	if err != nil {
		return nil, err
	}
	sn := sha256.Sum256(append([]byte("etcd-nomad peer CA cross\x00"), append(prevCert.Raw, nextCert.Raw...)...))
	tmpl := crossTemplate(prevCert, nextCert, new(big.Int).SetBytes(sn[:16]))
	// No path length limit on either: after several rotations a member
	// whose etcd still runs with the first peer CA loaded verifies through
	// one cross certificate per rotation.
	der, err := x509.CreateCertificate(bytes.NewReader(nil), tmpl, prevCert, nextCert.PublicKey, prevKey)
	if err != nil {
		return nil, fmt.Errorf("cross-sign the new peer CA: %w", err)
	}
	return pemCertificate(der), nil
}

func pemCertificate(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
