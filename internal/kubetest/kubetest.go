// Package kubetest starts a real kube-apiserver on Debian's etcd, on loopback,
// for tests: no Docker, no kubelet, no controllers. Controllers stands in
// for the workload controllers and the kubelet through the status
// subresources; Proxy counts the requests that reach the server.
//
// The kube-apiserver binary comes from $KUBE_APISERVER, else from the cache
// hack/kube-apiserver/build.sh fills (${CHARTPIN_CACHE:-$HOME/.cache/chartpin}/kube-apiserver-VERSION).
// Without it a test skips loudly, or fails when CHARTPIN_REQUIRE_INTEGRATION=1.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/chartpin/chartpin/internal/testcert"
	"github.com/chartpin/chartpin/internal/testenv"
)

// Version is the kube-apiserver the harness expects (and build.sh builds).
const Version = "v1.37.2"

// AdminToken authenticates as a member of system:masters.
const AdminToken = "kubetest-admin-token"

// User is an extra identity in the token auth file.
type User struct {
	Token, Name string
	Groups      []string
}

// ServiceAccountUser is the identity RBAC treats as ServiceAccount ns/name.
func ServiceAccountUser(token, namespace, name string) User {
	return User{
		Token:  token,
		Name:   "system:serviceaccount:" + namespace + ":" + name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
}

// Server is one running kube-apiserver and its etcd.
type Server struct {
	// URL is https://127.0.0.1:PORT.
	URL string
	// CA is the PEM of the self-signed serving certificate.
	CA []byte
	// Dir holds certificates, tokens, etcd data and logs.
	Dir string
	// Startup is how long the API server took to become ready.
	Startup time.Duration

	procs []*proc
	logs  map[string]*os.File
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process exits
}

// Binary finds kube-apiserver: $KUBE_APISERVER, else the build.sh cache.
func Binary() (string, error) {
	if p := os.Getenv("KUBE_APISERVER"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("KUBE_APISERVER=%s: %w", p, err)
		}
		return p, nil
	}
	cache := os.Getenv("CHARTPIN_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, ".cache", "chartpin")
	}
	p := filepath.Join(cache, "kube-apiserver-"+Version)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no kube-apiserver at %s (build it once per machine: hack/kube-apiserver/build.sh, ~10 minutes; or set KUBE_APISERVER)", p)
	}
	return p, nil
}

// Etcd finds Debian's etcd (apt-get install etcd-server).
func Etcd() (string, error) {
	if p := os.Getenv("ETCD"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("etcd")
	if err != nil {
		return "", fmt.Errorf("no etcd on PATH (apt-get install -y etcd-server): %w", err)
	}
	return p, nil
}

// Require skips the test loudly when a binary is missing, or fails it when
// CHARTPIN_REQUIRE_INTEGRATION=1.
func Require(t testing.TB) (apiserver, etcd string) {
	t.Helper()
	a, errA := Binary()
	e, errE := Etcd()
	if err := errors.Join(errA, errE); err != nil {
		testenv.Missing(t, "a real kube-apiserver: "+err.Error())
	}
	return a, e
}

// Start runs etcd and kube-apiserver for the test; users are added to the
// token auth file next to the admin. Everything stops at t.Cleanup.
func Start(t testing.TB, users ...User) *Server {
	t.Helper()
	apiserver, etcd := Require(t)
	s, err := start(t.TempDir(), apiserver, etcd, users)
	if s != nil {
		t.Cleanup(s.Stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func start(dir, apiserver, etcd string, users []User) (*Server, error) {
	s := &Server{Dir: dir, logs: map[string]*os.File{}}
	ports, err := freePorts(3)
	if err != nil {
		return s, err
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	if err := s.run("etcd", etcd,
		"--name=kubetest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=kubetest="+peerURL, "--log-level=error",
	); err != nil {
		return s, err
	}
	if err := s.waitHTTP(etcdURL+"/health", nil, 30*time.Second); err != nil {
		return s, fmt.Errorf("etcd did not become healthy: %w\n%s", err, s.logTail("etcd"))
	}
	if err := s.writeFiles(users); err != nil {
		return s, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	started := time.Now()
	if err := s.run("kube-apiserver", apiserver,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]),
		"--tls-cert-file="+filepath.Join(dir, "serving.crt"),
		"--tls-private-key-file="+filepath.Join(dir, "serving.key"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--anonymous-auth=false",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+filepath.Join(dir, "sa.pub"),
		"--service-account-signing-key-file="+filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--endpoint-reconciler-type=none",
		// No controller manager creates default ServiceAccounts.
		"--disable-admission-plugins=ServiceAccount",
		"--enable-priority-and-fairness=false",
		"--profiling=false",
		"--cert-dir="+filepath.Join(dir, "certs"),
	); err != nil {
		return s, err
	}
	if err := s.waitHTTP(s.URL+"/readyz", http.Header{"Authorization": {"Bearer " + AdminToken}}, 90*time.Second); err != nil {
		return s, fmt.Errorf("kube-apiserver did not become ready: %w\n%s", err, s.logTail("kube-apiserver"))
	}
	s.Startup = time.Since(started)
	return s, nil
}

// Config authenticates with token against the server (AdminToken for the admin).
func (s *Server) Config(token string) *rest.Config {
	return &rest.Config{
		Host:            s.URL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: s.CA},
		QPS:             1000,
		Burst:           1000,
	}
}

// Client is a clientset authenticating with token.
func (s *Server) Client(t testing.TB, token string) *kubernetes.Clientset {
	t.Helper()
	c, err := kubernetes.NewForConfig(s.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Kubeconfig writes a kubeconfig for token and returns its path.
func (s *Server) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	return writeKubeconfig(t, s.Dir, s.URL, s.CA, token, "")
}

// writeKubeconfig writes a kubeconfig for token against server into dir
// and returns its path.
func writeKubeconfig(t testing.TB, dir, server string, ca []byte, token, namespace string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kubetest
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: user
  user: {token: %q}
contexts:
- name: kubetest
  context: {cluster: kubetest, user: user, namespace: %q}
current-context: kubetest
`, server, base64.StdEncoding.EncodeToString(ca), token, namespace)
	f, err := os.CreateTemp(dir, "kubeconfig-*")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Stop ends the API server, then etcd.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.cmd.Process.Kill() // only the processes this Server started
		<-p.done
	}
	s.procs = nil
	for _, f := range s.logs {
		f.Close()
	}
}

func (s *Server) run(name, bin string, args ...string) error {
	log, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err
	}
	s.logs[name] = log
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = s.Dir
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	s.procs = append(s.procs, p)
	return nil
}

func (s *Server) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, name+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return name + " log (" + filepath.Join(s.Dir, name+".log") + "):\n" + string(b)
}

func (s *Server) waitHTTP(url string, h http.Header, limit time.Duration) error {
	pool := x509.NewCertPool()
	if s.CA != nil {
		pool.AppendCertsFromPEM(s.CA)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig(pool)}}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		for _, p := range s.procs {
			select {
			case <-p.done:
				return fmt.Errorf("%s exited: %s", p.name, p.cmd.ProcessState)
			default:
			}
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s: %s", url, resp.Status)
		}
		last = err
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("after %s: %w", limit, last)
}

// writeFiles writes the serving certificate, the service-account key pair
// and the token auth file.
func (s *Server) writeFiles(users []User) error {
	ca, key, err := testcert.Loopback("kubetest")
	if err != nil {
		return err
	}
	s.CA = ca
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	var tokens bytes.Buffer
	fmt.Fprintf(&tokens, "%s,kubetest-admin,kubetest-admin,\"system:masters\"\n", AdminToken)
	for i, u := range users {
		fmt.Fprintf(&tokens, "%s,%s,kubetest-user-%d,\"%s\"\n", u.Token, u.Name, i, strings.Join(u.Groups, ","))
	}
	files := map[string][]byte{
		"serving.crt": s.CA,
		"serving.key": key,
		"sa.key":      pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(sa)}),
		"sa.pub":      pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}),
		"tokens.csv":  tokens.Bytes(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(s.Dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}
