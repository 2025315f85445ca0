package gitrepo

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	gossh "golang.org/x/crypto/ssh"
)

// AuthError reports that the remote refused the credentials (or required some). It is never
// retried. Its text never contains secrets.
type AuthError struct {
	URL string // with any user info removed
	Err error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("authentication to %s failed: %v", e.URL, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

func readSecret(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The error names the file, never its content.
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// auth builds the transport credentials from the configured files (nil for file:// or none).
func (r *Remote) auth() (transport.AuthMethod, error) {
	c := r.cfg
	ep, err := transport.NewEndpoint(c.URL)
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w", redactURL(c.URL), err)
	}
	switch ep.Protocol {
	case "http", "https":
		if c.PasswordFile == "" {
			_, fromURL := withoutUserinfo(c.URL, nil) // user:password@ in the URL, if any
			return fromURL, nil
		}
		pw, err := readSecret(c.PasswordFile, "password")
		if err != nil {
			return nil, err
		}
		user := c.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: pw}, nil
	case "ssh":
		if c.SSHKeyFile == "" {
			return nil, fmt.Errorf("remote %s: ssh URL needs SSHKeyFile", redactURL(c.URL))
		}
		var pass string
		if c.SSHKeyPassphraseFile != "" {
			if pass, err = readSecret(c.SSHKeyPassphraseFile, "ssh key passphrase"); err != nil {
				return nil, err
			}
		}
		user := c.SSHUser
		if user == "" {
			user = ep.User
		}
		if user == "" {
			user = "git"
		}
		keys, err := gitssh.NewPublicKeysFromFile(user, c.SSHKeyFile, pass)
		if err != nil {
			return nil, fmt.Errorf("load ssh key %s: %w", c.SSHKeyFile, err)
		}
		switch {
		case c.InsecureIgnoreHostKey:
			keys.HostKeyCallback = gossh.InsecureIgnoreHostKey() //nolint:gosec // explicit opt-in
		case c.KnownHostsFile != "":
			cb, err := gitssh.NewKnownHostsCallback(c.KnownHostsFile)
			if err != nil {
				return nil, fmt.Errorf("load known_hosts %s: %w", c.KnownHostsFile, err)
			}
			keys.HostKeyCallback = cb
		default:
			return nil, fmt.Errorf("remote %s: ssh needs KnownHostsFile (or InsecureIgnoreHostKey)", redactURL(c.URL))
		}
		return keys, nil
	default:
		return nil, nil
	}
}

// signer loads the OpenPGP signing key, or nil when none is configured.
func (r *Remote) signer() (*openpgp.Entity, error) {
	c := r.cfg
	if c.SignKeyFile == "" {
		return nil, nil
	}
	f, err := os.Open(c.SignKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read signing key file: %w", err)
	}
	defer f.Close()
	ring, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		if _, serr := f.Seek(0, 0); serr != nil {
			return nil, fmt.Errorf("read signing key %s: %w", c.SignKeyFile, serr)
		}
		if ring, err = openpgp.ReadKeyRing(f); err != nil {
			return nil, fmt.Errorf("read signing key %s: %w", c.SignKeyFile, err)
		}
	}
	for _, e := range ring {
		if e.PrivateKey == nil {
			continue
		}
		if e.PrivateKey.Encrypted {
			if c.SignKeyPassphraseFile == "" {
				return nil, fmt.Errorf("signing key %s is encrypted and no passphrase file is set", c.SignKeyFile)
			}
			pass, err := readSecret(c.SignKeyPassphraseFile, "signing key passphrase")
			if err != nil {
				return nil, err
			}
			if err := e.DecryptPrivateKeys([]byte(pass)); err != nil {
				return nil, fmt.Errorf("decrypt signing key %s: %w", c.SignKeyFile, err)
			}
		}
		return e, nil
	}
	return nil, fmt.Errorf("signing key file %s holds no private key", c.SignKeyFile)
}

func isAuthErr(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)
}
