package gitrepo

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// TestRemoteSSHAuthConfig checks the SSH credentials are built from files (no SSH server is run).
func TestRemoteSSHAuthConfig(t *testing.T) {
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	known := filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(known, []byte("git.example.com "+string(gossh.MarshalAuthorizedKey(sshPub))), 0o600); err != nil {
		t.Fatal(err)
	}
	const url = "ssh://deploy@git.example.com/platform.git"
	if _, err := NewRemote(RemoteConfig{URL: url, SSHKeyFile: keyFile}); err == nil || !strings.Contains(err.Error(), "KnownHostsFile") {
		t.Fatalf("missing known_hosts accepted: %v", err)
	}
	r, err := NewRemote(RemoteConfig{URL: url, SSHKeyFile: keyFile, KnownHostsFile: known})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := r.auth()
	if err != nil {
		t.Fatal(err)
	}
	keys, ok := auth.(*gitssh.PublicKeys)
	if !ok || keys.User != "deploy" || keys.HostKeyCallback == nil {
		t.Fatalf("auth %#v", auth)
	}
	if _, err := NewRemote(RemoteConfig{URL: url, SSHKeyFile: keyFile, InsecureIgnoreHostKey: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRemote(RemoteConfig{URL: url, SSHKeyFile: filepath.Join(dir, "missing"), InsecureIgnoreHostKey: true}); err == nil {
		t.Fatal("missing key file accepted")
	}
	// HTTPS: a missing password file is reported without content; user info is redacted.
	_, err = NewRemote(RemoteConfig{URL: "https://bot:pw@example.com/x.git", PasswordFile: filepath.Join(dir, "nope")})
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing password file: %v", err)
	}
	if got := redactURL("https://bot:pw@example.com/x.git"); got != "https://example.com/x.git" {
		t.Fatalf("redact %q", got)
	}
}
