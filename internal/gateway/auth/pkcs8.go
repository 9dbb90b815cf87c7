package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/pbkdf2"
	"crypto/sha1" //nolint:gosec // PBKDF2's default PRF (RFC 8018) is HMAC-SHA1; files that name no PRF use it
	"crypto/sha256"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"fmt"
	"hash"
)

// Encrypted PKCS#8 private keys ("ENCRYPTED PRIVATE KEY", RFC 5958 and RFC 8018):
// PBES2 with PBKDF2 (HMAC-SHA1 or HMAC-SHA256) and AES-CBC. Akash's tools write
// this (PBKDF2-HMAC-SHA256, 100,000 iterations, AES-256-CBC), so does
// `openssl pkcs8 -topk8`.

var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	aesCBC        = map[string]int{ // OID → key length
		asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}.String():  16,
		asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}.String(): 24,
		asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}.String(): 32,
	}
)

// maxPBKDF2Iterations bounds the work a file can ask for (Akash's tools use 100,000,
// OpenSSL 2,048).
const maxPBKDF2Iterations = 1 << 20

// errWrongPassword: the password does not decrypt the key (bad padding or no key
// inside).
var errWrongPassword = errors.New("wrong password")

type encryptedPrivateKeyInfo struct {
	Algo pkix.AlgorithmIdentifier
	Data []byte
}

type pbes2Params struct {
	KDF pkix.AlgorithmIdentifier
	Enc pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

// pkcs8Cipher is a parsed encrypted PKCS#8 key, ready to be tried with passwords.
type pkcs8Cipher struct {
	salt, iv, data []byte
	iterations     int
	keyLen         int
	prf            func() hash.Hash
}

// parseEncryptedPKCS8 reads the structure of an encrypted PKCS#8 key; it refuses
// what it cannot decrypt (another scheme, cipher or PRF) before any password is tried.
func parseEncryptedPKCS8(der []byte) (*pkcs8Cipher, error) {
	var info encryptedPrivateKeyInfo
	if err := unmarshalAll(der, &info); err != nil {
		return nil, errors.New("not an encrypted PKCS#8 key (malformed ASN.1)")
	}
	if !info.Algo.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("encryption scheme %s: only PBES2 is supported", info.Algo.Algorithm)
	}
	var p pbes2Params
	if err := unmarshalAll(info.Algo.Parameters.FullBytes, &p); err != nil {
		return nil, fmt.Errorf("PBES2 parameters: %w", err)
	}
	if !p.KDF.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("key derivation %s: only PBKDF2 is supported", p.KDF.Algorithm)
	}
	var kdf pbkdf2Params
	if err := unmarshalAll(p.KDF.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("PBKDF2 parameters: %w", err)
	}
	c := &pkcs8Cipher{salt: kdf.Salt, iterations: kdf.Iterations, data: info.Data}
	switch {
	case len(kdf.PRF.Algorithm) == 0 || kdf.PRF.Algorithm.Equal(oidHMACSHA1):
		c.prf = sha1.New
	case kdf.PRF.Algorithm.Equal(oidHMACSHA256):
		c.prf = sha256.New
	default:
		return nil, fmt.Errorf("PBKDF2 PRF %s: only HMAC-SHA1 and HMAC-SHA256 are supported", kdf.PRF.Algorithm)
	}
	if c.iterations < 1 || c.iterations > maxPBKDF2Iterations {
		return nil, fmt.Errorf("PBKDF2 iteration count %d: want 1 to %d", c.iterations, maxPBKDF2Iterations)
	}
	if len(c.salt) == 0 {
		return nil, errors.New("PBKDF2 salt is empty")
	}
	var ok bool
	if c.keyLen, ok = aesCBC[p.Enc.Algorithm.String()]; !ok {
		return nil, fmt.Errorf("cipher %s: only AES-128/192/256-CBC are supported", p.Enc.Algorithm)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != c.keyLen {
		return nil, fmt.Errorf("PBKDF2 key length %d does not fit the cipher (%d bytes)", kdf.KeyLength, c.keyLen)
	}
	if err := unmarshalAll(p.Enc.Parameters.FullBytes, &c.iv); err != nil {
		return nil, fmt.Errorf("cipher IV: %w", err)
	}
	if len(c.iv) != aes.BlockSize {
		return nil, fmt.Errorf("cipher IV is %d bytes, want %d", len(c.iv), aes.BlockSize)
	}
	if len(c.data) == 0 || len(c.data)%aes.BlockSize != 0 {
		return nil, fmt.Errorf("encrypted key is %d bytes, not a whole number of AES blocks", len(c.data))
	}
	return c, nil
}

// decrypt returns the PKCS#8 DER inside, or errWrongPassword when the padding shows
// the password is not the one (a wrong password can also pass this check: the caller
// parses what comes out).
func (c *pkcs8Cipher) decrypt(password []byte) ([]byte, error) {
	key, err := pbkdf2.Key(c.prf, string(password), c.salt, c.iterations, c.keyLen)
	if err != nil {
		return nil, fmt.Errorf("PBKDF2: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	out := make([]byte, len(c.data))
	cipher.NewCBCDecrypter(block, c.iv).CryptBlocks(out, c.data)
	return unpad(out)
}

// unpad removes PKCS#7 padding (RFC 8018 section 6.1.1 step 4).
func unpad(b []byte) ([]byte, error) {
	n := int(b[len(b)-1])
	if n == 0 || n > aes.BlockSize || n > len(b) {
		return nil, errWrongPassword
	}
	for _, v := range b[len(b)-n:] {
		if int(v) != n {
			return nil, errWrongPassword
		}
	}
	return b[:len(b)-n], nil
}

// unmarshalAll decodes exactly one ASN.1 value.
func unmarshalAll(der []byte, v any) error {
	rest, err := asn1.Unmarshal(der, v)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the value", len(rest))
	}
	return nil
}
