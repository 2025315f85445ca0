package drift

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// Redacted stands for a Secret value when no HMAC key is configured.
const Redacted = "(redacted)"

// isSecret reports whether a kind is the core Secret.
func isSecret(group, kind string) bool { return group == "" && kind == "Secret" }

// secretField reports whether p is inside a Secret's data or stringData.
func secretField(p fieldpath.Path) bool {
	return len(p) > 0 && p[0].FieldName != nil && (*p[0].FieldName == "data" || *p[0].FieldName == "stringData")
}

// maskSecret replaces a Secret value (or a whole data map) by an HMAC-SHA256 of its decoded
// bytes under the install's key: two reports can say that values are equal or differ, and no
// dictionary without the key can reverse them. Without a key the value is only "(redacted)".
func maskSecret(v any, key []byte) any {
	if v == nil {
		return nil
	}
	if m, ok := v.(map[string]any); ok {
		out := make(map[string]any, len(m))
		for k, x := range m {
			out[k] = maskSecret(x, key)
		}
		return out
	}
	if len(key) == 0 {
		return Redacted
	}
	raw := []byte(fmt.Sprint(v))
	if s, ok := v.(string); ok {
		if dec, err := base64.StdEncoding.DecodeString(s); err == nil {
			raw = dec
		}
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(raw)
	return "hmac-sha256:" + hex.EncodeToString(mac.Sum(nil)[:12])
}

// secretData folds a Secret's stringData into data (base64), as the API server does on write.
func secretData(obj map[string]any) {
	sd, ok := obj["stringData"].(map[string]any)
	if !ok {
		return
	}
	data, _ := obj["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
	}
	for k, v := range sd {
		data[k] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(v)))
	}
	obj["data"] = data
	delete(obj, "stringData")
}

// InstallKey returns the install's HMAC key for Secret values, kept in the file at path (mode
// 0600) and made at random the first time, so HMACs in reports stay comparable across runs of
// one install and mean nothing anywhere else. The file appears whole or not at all (written
// aside, then linked into place); two processes racing to make it agree on one key.
func InstallKey(path string) ([]byte, error) {
	for range 2 {
		key, err := os.ReadFile(path)
		switch {
		case err == nil && len(key) == 32:
			return key, nil
		case err == nil:
			return nil, fmt.Errorf("secret HMAC key %s: %d bytes, want 32 (remove it to make a new one)", path, len(key))
		case !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("secret HMAC key: %w", err)
		}
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("secret HMAC key: %w", err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("secret HMAC key: %w", err)
		}
		tmp, err := os.CreateTemp(filepath.Dir(path), ".hmac-key-*")
		if err != nil {
			return nil, fmt.Errorf("secret HMAC key: %w", err)
		}
		_, werr := tmp.Write(key)
		if cerr := tmp.Close(); werr == nil {
			werr = cerr
		}
		if werr == nil {
			werr = os.Link(tmp.Name(), path)
		}
		_ = os.Remove(tmp.Name())
		if werr == nil {
			return key, nil
		}
		if !errors.Is(werr, os.ErrExist) {
			return nil, fmt.Errorf("secret HMAC key %s: %w", path, werr)
		}
		// Another process made it first: read theirs.
	}
	return nil, fmt.Errorf("secret HMAC key %s: could not be read or made", path)
}
