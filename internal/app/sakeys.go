package app

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// readSigningKey reads --service-account-signing-key-file: the first PEM
// block of file that is an RSA or ECDSA private key (PKCS#1, SEC 1 or
// PKCS#8), other blocks ("EC PARAMETERS") skipped, as kube-apiserver
// reads it, with its words.
func readSigningKey(file string) (crypto.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("failed to parse service-account-issuer-key-file: %w", err)
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		var key any
		switch block.Type {
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		default:
			continue
		}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			if err == nil {
				return k, nil
			}
		case *ecdsa.PrivateKey:
			if err == nil {
				return k, nil
			}
		}
	}
	return nil, fmt.Errorf("failed to parse service-account-issuer-key-file: error reading private key file %s: data does not contain a valid RSA or ECDSA private key", file)
}

// readPublicKeys reads --service-account-key-file: the RSA and ECDSA
// public keys of every PEM block of each file (public keys, certificates
// and private keys alike), other blocks skipped; a file with none is an
// error, as kube-apiserver reads them, with its words.
func readPublicKeys(files []string) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		found := 0
		for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
			if k := publicKeyOf(block.Bytes); k != nil {
				keys = append(keys, k)
				found++
			}
		}
		if found == 0 {
			return nil, fmt.Errorf("error reading public key file %s: %w", file, errNoPublicKeys)
		}
	}
	return keys, nil
}

var errNoPublicKeys = errors.New("data does not contain any valid RSA or ECDSA public keys")

// publicKeyOf is the RSA or ECDSA public key der holds: a private key
// (PKCS#1, SEC 1, PKCS#8), a public key (PKIX, PKCS#1) or a
// certificate; nil if none.
func publicKeyOf(der []byte) crypto.PublicKey {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return &k.PublicKey
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return &k.PublicKey
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return rsaOrECDSA(s.Public())
		}
	}
	if k, err := x509.ParsePKIXPublicKey(der); err == nil {
		return rsaOrECDSA(k)
	}
	if k, err := x509.ParsePKCS1PublicKey(der); err == nil {
		return k
	}
	if c, err := x509.ParseCertificate(der); err == nil {
		return rsaOrECDSA(c.PublicKey)
	}
	return nil
}

func rsaOrECDSA(k any) crypto.PublicKey {
	switch k.(type) {
	case *rsa.PublicKey, *ecdsa.PublicKey:
		return k
	}
	return nil
}
