package kubetest

import (
	"crypto/tls"
	"crypto/x509"
)

func tlsConfig(pool *x509.CertPool) *tls.Config {
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
