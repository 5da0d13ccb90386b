package registrytest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/chartpin/chartpin/internal/testcert"
	"github.com/chartpin/chartpin/internal/testenv"
)

// DistributionOptions configures StartDistribution.
type DistributionOptions struct {
	// Htpasswd turns on basic auth with these users (user → password).
	Htpasswd map[string]string
	// ProxyRemoteURL runs the registry as a pull-through mirror of this
	// registry (http://host:port), distribution's proxy mode.
	ProxyRemoteURL string
	// TLS serves HTTPS with a fresh self-signed certificate (Distribution.CA),
	// as a registry taking passwords must; Pusher trusts it.
	TLS bool
}

// Distribution is Debian's docker-registry (CNCF distribution 2.8) running
// on a free 127.0.0.1 port with a temporary storage directory.
type Distribution struct {
	Pusher // Host is 127.0.0.1:PORT; Auth is the first user's, if any
	// Dir holds config.yml, htpasswd and the storage.
	Dir string
	// CA is the serving certificate (PEM) with TLS, and CAFile its path.
	CA     []byte
	CAFile string

	log *lockedBuffer
}

// Log is what the registry printed so far.
func (d *Distribution) Log() string { return d.log.String() }

// StartDistribution starts docker-registry for the test and stops it at cleanup.
func StartDistribution(t testing.TB, opts DistributionOptions) *Distribution {
	t.Helper()
	bin := testenv.RequireBinary(t, "docker-registry", "docker-registry")
	d := &Distribution{Dir: t.TempDir(), log: &lockedBuffer{}}
	auth := ""
	if len(opts.Htpasswd) > 0 {
		htpasswd := testenv.RequireBinary(t, "htpasswd", "apache2-utils")
		users := make([]string, 0, len(opts.Htpasswd))
		for u := range opts.Htpasswd {
			users = append(users, u)
		}
		sort.Strings(users)
		var file bytes.Buffer
		for _, u := range users {
			// bcrypt (-B) is the only hash distribution accepts; cost 4 keeps tests fast.
			out, err := exec.Command(htpasswd, "-Bbn", "-C", "4", u, opts.Htpasswd[u]).Output()
			if err != nil {
				t.Fatalf("htpasswd for %s: %v", u, err)
			}
			file.Write(bytes.TrimSpace(out))
			file.WriteByte('\n')
		}
		path := filepath.Join(d.Dir, "htpasswd")
		if err := os.WriteFile(path, file.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		auth = fmt.Sprintf("auth: {htpasswd: {realm: chartpin-test, path: %q}}\n", path)
		d.Auth = authn.FromConfig(authn.AuthConfig{Username: users[0], Password: opts.Htpasswd[users[0]]})
	}
	if opts.ProxyRemoteURL != "" {
		auth += fmt.Sprintf("proxy: {remoteurl: %q}\n", opts.ProxyRemoteURL)
	}
	httpTLS := ""
	if opts.TLS {
		httpTLS = tlsConfig(t, d)
		d.Transport = &http.Transport{TLSClientConfig: testcert.ClientConfig(d.CA)}
	}
	var lastErr error
	for try := 0; try < 3; try++ { // a free port can be taken between probe and bind
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		d.Host = fmt.Sprintf("127.0.0.1:%d", port)
		config := fmt.Sprintf("version: 0.1\nlog: {level: warn, accesslog: {disabled: true}}\n"+
			"storage: {filesystem: {rootdirectory: %q}, delete: {enabled: true}}\nhttp: {addr: %q%s}\n%s",
			filepath.Join(d.Dir, "data"), d.Host, httpTLS, auth)
		cfgPath := filepath.Join(d.Dir, "config.yml")
		if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "serve", cfgPath)
		cmd.Stdout, cmd.Stderr = d.log, d.log
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", bin, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if lastErr = waitReady(d.Transport, d.Host, exited); lastErr == nil {
			t.Cleanup(func() { stop(cmd, exited) })
			return d
		}
		stop(cmd, exited)
	}
	t.Fatalf("docker-registry did not start: %v\n%s", lastErr, d.Log())
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tlsConfig writes a serving certificate into d.Dir and returns the http.tls
// setting.
func tlsConfig(t testing.TB, d *Distribution) string {
	t.Helper()
	cert, key, err := testcert.Loopback("docker-registry")
	if err != nil {
		t.Fatal(err)
	}
	d.CA, d.CAFile = cert, filepath.Join(d.Dir, "tls.crt")
	keyFile := filepath.Join(d.Dir, "tls.key")
	if err := os.WriteFile(d.CAFile, cert, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(", tls: {certificate: %q, key: %q}", d.CAFile, keyFile)
}

// waitReady polls GET /v2/ until the registry answers (200, or 401 with
// auth); a transport means HTTPS through it.
func waitReady(tr http.RoundTripper, host string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	client, scheme := &http.Client{Timeout: time.Second, Transport: tr}, "http"
	if tr != nil {
		scheme = "https"
	}
	for {
		resp, err := client.Get(scheme + "://" + host + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("exited early")
		case <-ctx.Done():
			return fmt.Errorf("no answer on %s: %v", host, err)
		case <-tick.C:
		}
	}
}

func stop(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
