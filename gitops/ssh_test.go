package gitops

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/chartpin/chartpin/internal/gittest"
	"github.com/chartpin/chartpin/internal/testenv"
)

// sshGit serves git over SSH on loopback: the SSH layer is
// golang.org/x/crypto/ssh, the git side is the real git-upload-pack and
// git-receive-pack. Only clientKey may log in. It returns the address and
// counts sessions.
func sshGit(t *testing.T, clientKey ssh.PublicKey) (addr string, hostKey ssh.PublicKey, sessions *atomic.Int64) {
	t.Helper()
	testenv.RequireBinary(t, "git-receive-pack", "git")
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), clientKey.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("key not authorized")
	}}
	cfg.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sessions = &atomic.Int64{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				_, chans, reqs, err := ssh.NewServerConn(conn, cfg)
				if err != nil {
					conn.Close()
					return
				}
				go ssh.DiscardRequests(reqs)
				for nc := range chans {
					if nc.ChannelType() != "session" {
						nc.Reject(ssh.UnknownChannelType, "session only")
						continue
					}
					ch, creqs, err := nc.Accept()
					if err != nil {
						continue
					}
					sessions.Add(1)
					go serveGit(ch, creqs)
				}
			}()
		}
	}()
	return l.Addr().String(), signer.PublicKey(), sessions
}

func serveGit(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(req.Type == "env", nil)
			continue
		}
		var p struct{ Command string }
		ssh.Unmarshal(req.Payload, &p)
		prog, arg, _ := strings.Cut(p.Command, " ")
		if prog != "git-upload-pack" && prog != "git-receive-pack" {
			req.Reply(false, nil)
			return
		}
		req.Reply(true, nil)
		cmd := exec.Command(prog, strings.Trim(arg, "'"))
		stdin, _ := cmd.StdinPipe()
		cmd.Stdout, cmd.Stderr = ch, ch.Stderr()
		status := uint32(0)
		if err := cmd.Start(); err != nil {
			status = 127
		} else {
			go func() { io.Copy(stdin, ch); stdin.Close() }()
			if err := cmd.Wait(); err != nil {
				status = 1
			}
		}
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
		return
	}
}

func writeKey(t *testing.T, dir string) (path string, pub ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return path, signer.PublicKey()
}

func TestPushOverSSHWithKey(t *testing.T) {
	work, bare := fixture(t)
	keys := t.TempDir()
	key, pub := writeKey(t, keys)
	addr, hostKey, sessions := sshGit(t, pub)
	known := filepath.Join(keys, "known_hosts")
	if err := os.WriteFile(known, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SSH_KNOWN_HOSTS", known)
	gittest.Git(t, work, "remote", "set-url", "origin", "ssh://git@"+addr+bare)

	// A key the server does not know: refused.
	other, _ := writeKey(t, t.TempDir())
	if _, err := release(t, open(t, work, Options{SSHKey: other}), "sha256:aaa"); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Fatalf("unknown key: %v", err)
	}

	c, err := release(t, open(t, work, Options{SSHKey: key, Token: "ignored-for-ssh"}), "sha256:aaa")
	if err != nil {
		t.Fatal(err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != c.Hash.String() {
		t.Fatalf("remote branch at %s, want %s", got, c.Hash)
	}
	t.Logf("push over SSH: %d sessions", sessions.Load())

	// An unknown host key is refused (no trust on first use).
	if err := os.WriteFile(known, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := release(t, open(t, work, Options{SSHKey: key}), "sha256:bbb"); err == nil || !strings.Contains(err.Error(), "knownhosts") {
		t.Fatalf("host missing from known_hosts: %v", err)
	}
	if got := gittest.Git(t, bare, "rev-parse", "chartpin/pins"); got != c.Hash.String() {
		t.Fatal("the branch moved after a refused push")
	}
}
