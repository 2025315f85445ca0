package sinks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// Sink delivers messages to one chat destination.
type Sink interface {
	// Name identifies the sink in logs and metrics (never contains secrets).
	Name() string
	// Send delivers m once; an error means it may not have been delivered.
	Send(ctx context.Context, m message.Message) error
}

// ReadSecret reads a secret from file (trailing whitespace trimmed) or, when file is empty,
// from the environment variable env. Literal values are deliberately not supported. Errors
// name the file or variable, never the value.
func ReadSecret(what, file, env string) (string, error) {
	switch {
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("sinks: read %s from file: %w", what, err)
		}
		s := strings.TrimSpace(string(b))
		if s == "" {
			return "", fmt.Errorf("sinks: %s file %s is empty", what, file)
		}
		return s, nil
	case env != "":
		s := strings.TrimSpace(os.Getenv(env))
		if s == "" {
			return "", fmt.Errorf("sinks: %s: environment variable %s is not set", what, env)
		}
		return s, nil
	}
	return "", fmt.Errorf("sinks: %s: neither a file nor an environment variable is configured", what)
}

// HTTPError is a non-2xx answer of a chat API. Body is a redacted excerpt of the response.
type HTTPError struct {
	Sink       string
	StatusCode int
	Body       string
	// RetryAfter is the delay the server asked for (429), zero when none.
	RetryAfter time.Duration
}

// Error implements error.
func (e *HTTPError) Error() string {
	s := fmt.Sprintf("%s: HTTP %d", e.Sink, e.StatusCode)
	if e.Body != "" {
		s += ": " + e.Body
	}
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %s)", e.RetryAfter)
	}
	return s
}

// Permanent reports whether retrying the same request cannot succeed (4xx other than 408/429).
func (e *HTTPError) Permanent() bool {
	return e.StatusCode >= 400 && e.StatusCode < 500 && e.StatusCode != http.StatusTooManyRequests && e.StatusCode != http.StatusRequestTimeout
}

// RetryAfter returns the delay an error asks for before retrying (an HTTP 429's Retry-After).
func RetryAfter(err error) (time.Duration, bool) {
	var he *HTTPError
	if errors.As(err, &he) && he.RetryAfter > 0 {
		return he.RetryAfter, true
	}
	return 0, false
}

// IsPermanent reports whether err is an answer that retrying cannot change.
func IsPermanent(err error) bool {
	var he *HTTPError
	return errors.As(err, &he) && he.Permanent()
}

// redactedError carries a message with secrets removed; it unwraps to the cause only when the
// cause itself cannot carry the URL (it is not a *url.Error).
type redactedError struct {
	msg   string
	cause error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.cause }

// redact removes every secret from err's text. A *url.Error (which embeds the request URL) is
// replaced by one whose URL is "[redacted]"; context errors stay matchable with errors.Is.
func redact(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	var cause error = err
	var ue *url.Error
	if errors.As(err, &ue) {
		cause = &url.Error{Op: ue.Op, URL: "[redacted]", Err: scrubbed(ue.Err, secrets)}
	}
	return &redactedError{msg: scrub(cause.Error(), secrets), cause: scrubbed(cause, secrets)}
}

// scrubbed returns err unless its text holds a secret, then a plain error without it.
func scrubbed(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if s := scrub(msg, secrets); s != msg {
		return errors.New(s)
	}
	return err
}

// scrub replaces each secret, and its URL-escaped forms, by [redacted].
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		if sec == "" {
			continue
		}
		for _, form := range []string{sec, url.PathEscape(sec), url.QueryEscape(sec)} {
			s = strings.ReplaceAll(s, form, "[redacted]")
		}
	}
	return s
}

// httpSink holds what the webhook sinks share.
type httpSink struct {
	name    string
	client  *http.Client
	secrets []string
}

func newHTTPSink(name string, client *http.Client, timeout time.Duration) httpSink {
	if client == nil {
		if timeout <= 0 {
			timeout = 15 * time.Second
		}
		client = &http.Client{Timeout: timeout}
	}
	return httpSink{name: name, client: client}
}

// Name implements Sink.
func (s httpSink) Name() string { return s.name }

// webhook reads an incoming-webhook URL (a secret, from a file or an environment variable) and
// returns the sink posting to it, with the URL redacted from its errors.
func webhook(name, urlFile, urlEnv string, client *http.Client, timeout time.Duration) (httpSink, string, error) {
	u, err := ReadSecret(name+" webhook URL", urlFile, urlEnv)
	if err != nil {
		return httpSink{}, "", err
	}
	s := newHTTPSink(name, client, timeout)
	s.secrets = []string{u}
	return s, u, nil
}

// postJSON encodes payload and posts it to target (see post).
func (s httpSink) postJSON(ctx context.Context, target string, payload any) error {
	body, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("%s: encode: %w", s.name, err)
	}
	_, err = s.post(ctx, target, body)
	return err
}

// post sends body as JSON to target; a non-2xx answer is an *HTTPError. The returned error
// never contains target or any of s.secrets.
func (s httpSink) post(ctx context.Context, target string, body []byte) ([]byte, error) {
	secrets := append([]string{target}, s.secrets...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s: build request: %w", s.name, redact(err, secrets...))
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: post: %w", s.name, redact(err, secrets...))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("%s: read answer: %w", s.name, redact(err, secrets...))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return data, &HTTPError{
			Sink:       s.name,
			StatusCode: resp.StatusCode,
			Body:       message.Truncate(scrub(strings.TrimSpace(string(data)), secrets), 200),
			RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()),
		}
	}
	return data, nil
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
