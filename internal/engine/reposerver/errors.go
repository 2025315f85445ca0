package reposerver

import (
	"errors"
	"strings"
)

// tlsFailure says whether err is a TLS handshake's failure (a wrong CA, a certificate for
// another name): a misconfiguration to report, never a repo-server merely out of reach.
func tlsFailure(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "handshake") || strings.Contains(msg, "x509") || strings.Contains(msg, "certificate")
}

// ErrUnreachable wraps a Manifests error that says the repo-server could not be reached (gRPC
// Unavailable, or its deadline passed while the caller's had not): the render itself may be fine.
var ErrUnreachable = errors.New("repo-server unreachable")
