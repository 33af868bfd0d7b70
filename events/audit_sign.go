package events

import (
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// auditSigAlg is the only signature algorithm of audit exports.
const auditSigAlg = "Ed25519"

// auditSigContext separates the signed bytes from any other use of the key.
const auditSigContext = "agentctl.audit header signature\n"

// AuditSigningBytes are the bytes an export's signature covers: a context
// line, then the header line without its signature member, exactly as
// Export writes it (members in struct order, no HTML escaping).
func AuditSigningBytes(h *AuditHeader) []byte {
	c := *h
	c.Signature = nil
	b, _ := marshalLine(&c) // strings and integers only: cannot fail
	return append([]byte(auditSigContext), b...)
}

// KeyID names an Ed25519 public key: "sha256:" + the hex digest of its 32
// bytes, so a verifier can tell which key signed before checking it.
func KeyID(pub ed25519.PublicKey) string {
	d := sha256.Sum256(pub)
	return "sha256:" + hex.EncodeToString(d[:])
}

// SignAuditHeader signs h (everything but its signature member) with key.
func SignAuditHeader(h *AuditHeader, key ed25519.PrivateKey) *AuditSignature {
	pub, _ := key.Public().(ed25519.PublicKey)
	return &AuditSignature{Alg: auditSigAlg, KeyID: KeyID(pub), Value: ed25519.Sign(key, AuditSigningBytes(h))}
}

// CheckAuditSignature verifies h's signature with pub; a missing signature,
// another key or any change to the header is an error.
func CheckAuditSignature(h *AuditHeader, pub ed25519.PublicKey) error {
	s := h.Signature
	switch {
	case s == nil:
		return errors.New("missing: the header is not signed, and --public-key asks for a signature")
	case s.Alg != auditSigAlg:
		return fmt.Errorf("signature algorithm %q, want %q", s.Alg, auditSigAlg)
	case s.KeyID != KeyID(pub):
		return fmt.Errorf("signed by key %s, the public key given is %s", s.KeyID, KeyID(pub))
	case !ed25519.Verify(pub, AuditSigningBytes(h), s.Value):
		return errors.New("wrong: it does not verify with the public key (the header was edited, or signed by another key)")
	}
	return nil
}

// ParseSigningKey reads an Ed25519 private key from PEM ("PRIVATE KEY",
// PKCS #8: `openssl genpkey -algorithm ed25519`). Errors never quote the key.
func ParseSigningKey(pemBytes []byte) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, errors.New("not a PEM \"PRIVATE KEY\" block (PKCS #8)")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, errors.New("PKCS #8 private key does not parse")
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key is %T, want Ed25519", k)
	}
	return ek, nil
}

// ParsePublicKey reads an Ed25519 public key from PEM ("PUBLIC KEY", PKIX:
// `openssl pkey -in KEY -pubout`).
func ParsePublicKey(pemBytes []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(pemBytes)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		return nil, errors.New("not a PEM \"PUBLIC KEY\" block (PKIX)")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("PKIX public key: %w", err)
	}
	ek, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key is %T, want Ed25519", k)
	}
	return ek, nil
}
