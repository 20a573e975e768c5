package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/kvd-project/kvd/internal/tlsutil"
)

// Certs are the files GenerateCerts writes: a client CA that issues the
// servers' client-facing certificate and the client's, and a separate peer
// CA that issues the members' peer certificate (docs/security.md's advice).
type Certs struct {
	ClientCA, PeerCA      string // CA certificates
	ServerCert, ServerKey string // shown to clients (--cert-file)
	PeerCert, PeerKey     string // shown to peers (--peer-cert-file)
	ClientCert, ClientKey string // the benchmark client's (--cert)
}

// GenerateCerts writes fresh ECDSA P-256 certificates into dir, valid for a
// day and naming hosts (IPs or DNS names) plus the loopback names.
func GenerateCerts(dir string, hosts ...string) (*Certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ips := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	dns := []string{"localhost"}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else if h != "" {
			dns = append(dns, h)
		}
	}
	g := certGen{dir: dir}
	cca, ccaKey := g.ca("kvbench client CA", "client-ca.crt")
	pca, pcaKey := g.ca("kvbench peer CA", "peer-ca.crt")
	c := &Certs{ClientCA: filepath.Join(dir, "client-ca.crt"), PeerCA: filepath.Join(dir, "peer-ca.crt")}
	c.ServerCert, c.ServerKey = g.leaf(cca, ccaKey, "kvd", "server", dns, ips)
	c.PeerCert, c.PeerKey = g.leaf(pca, pcaKey, "kvd-peer", "peer", dns, ips)
	c.ClientCert, c.ClientKey = g.leaf(cca, ccaKey, "kvbench", "client", nil, nil)
	if g.err != nil {
		return nil, fmt.Errorf("cluster: generating certificates: %w", g.err)
	}
	return c, nil
}

// ServerArgs are the kvd flags that turn TLS on with c, both ways
// authenticated.
func (c *Certs) ServerArgs() []string {
	return []string{"--cert-file", c.ServerCert, "--key-file", c.ServerKey,
		"--trusted-ca-file", c.ClientCA, "--client-cert-auth",
		"--peer-cert-file", c.PeerCert, "--peer-key-file", c.PeerKey,
		"--peer-trusted-ca-file", c.PeerCA, "--peer-client-cert-auth"}
}

// ClientFiles are the client's --cacert, --cert and --key.
func (c *Certs) ClientFiles() tlsutil.ClientFiles {
	return tlsutil.ClientFiles{CACert: c.ClientCA, Cert: c.ClientCert, Key: c.ClientKey}
}

// certGen keeps the first error, so GenerateCerts reads straight.
type certGen struct {
	dir string
	err error
}

func (g *certGen) ca(cn, file string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"kvbench"}},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	cert, key, _ := g.sign(tmpl, nil, nil, file, "")
	return cert, key
}

func (g *certGen) leaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn, name string, dns []string, ips []net.IP) (certFile, keyFile string) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    dns,
		IPAddresses: ips,
	}
	_, _, keyFile = g.sign(tmpl, ca, caKey, name+".crt", name+".key")
	return filepath.Join(g.dir, name+".crt"), keyFile
}

// sign makes a key, signs tmpl with parent (itself if nil) and writes the
// certificate to certName and, if keyName is set, the key to keyName.
func (g *certGen) sign(tmpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, certName, keyName string) (*x509.Certificate, *ecdsa.PrivateKey, string) {
	if g.err != nil {
		return nil, nil, ""
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		g.err = err
		return nil, nil, ""
	}
	if tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)); err != nil {
		g.err = err
		return nil, nil, ""
	}
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		g.err = err
		return nil, nil, ""
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		g.err = err
		return nil, nil, ""
	}
	g.write(certName, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	keyFile := ""
	if keyName != "" {
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			g.err = err
			return nil, nil, ""
		}
		g.write(keyName, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
		keyFile = filepath.Join(g.dir, keyName)
	}
	return cert, key, keyFile
}

func (g *certGen) write(name string, b []byte) {
	if g.err == nil {
		g.err = os.WriteFile(filepath.Join(g.dir, name), b, 0o600)
	}
}
