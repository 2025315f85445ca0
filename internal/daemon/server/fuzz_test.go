package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
)

// FuzzWebhookAuthentic: a push is authentic only with the HMAC of its body under the secret
// (GitHub) or the secret itself (GitLab), whatever the headers hold; nothing panics.
func FuzzWebhookAuthentic(f *testing.F) {
	f.Add([]byte(`{"ref":"refs/heads/main"}`), "sha256=00", "", "s3cret")
	f.Add([]byte(""), "", "s3cret", "s3cret")
	f.Add([]byte("x"), "sha256=zz", "wrong", "s3cret")
	f.Fuzz(func(t *testing.T, body []byte, sig, token, secret string) {
		if secret == "" {
			return
		}
		r, err := http.NewRequest(http.MethodPost, "http://auditor/api/v1/git-webhook", nil)
		if err != nil {
			t.Fatal(err)
		}
		if sig != "" {
			r.Header.Set("X-Hub-Signature-256", sig)
		}
		if token != "" {
			r.Header.Set("X-Gitlab-Token", token)
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		want := hex.EncodeToString(mac.Sum(nil))
		ok := authentic(r, body, secret)
		// What the request carries after net/http's header handling (values are trimmed).
		sig, token = r.Header.Get("X-Hub-Signature-256"), r.Header.Get("X-Gitlab-Token")
		valid := false
		switch {
		case sig != "":
			got, err := hex.DecodeString(strings.TrimPrefix(sig, "sha256="))
			valid = err == nil && hex.EncodeToString(got) == want
		case token != "":
			valid = token == secret
		}
		if ok != valid {
			t.Fatalf("authentic = %v for sig %q token %q, want %v", ok, sig, token, valid)
		}
	})
}
