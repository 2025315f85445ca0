package daemon

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// countingListener accepts connections on 127.0.0.1 and counts them, and the requests a server
// on it counts (the API server keeps connections to a webhook alive); serve decides what each
// gets.
type countingListener struct {
	net.Listener
	accepted, requests atomic.Int64
}

// calls are the connections and requests seen.
func (l *countingListener) calls() int64 { return l.accepted.Load() + l.requests.Load() }

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted.Add(1)
	}
	return c, err
}

func listenCounting(t testing.TB) *countingListener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	return &countingListener{Listener: ln}
}

// expiredCert is a self-signed certificate for 127.0.0.1 that expired yesterday, as PEM.
func expiredCert(t testing.TB) (certPEM []byte, cert tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "auditor-admission"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err = tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	require.NoError(t, err)
	return certPEM, cert
}

// configMaps is a List of n ConfigMaps in ns, for kubectl apply.
func configMaps(ns string, n int) string {
	var items []any
	for i := range n {
		items = append(items, map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("inway-%03d", i), "namespace": ns}, "data": map[string]any{"i": fmt.Sprint(i)}})
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	return string(b)
}

// TestAdmissionWebhookNeverInTheWay: with the auditor's webhook (failurePolicy Ignore, timeout
// 1 s) pointing at an auditor that is down (connections closed at once), answers too slowly, or
// serves an expired certificate, `kubectl apply` of 100 objects succeeds, each create waiting
// for the webhook at most its timeout. The counts show the API server did call it each time.
func TestAdmissionWebhookNeverInTheWay(t *testing.T) {
	testcluster.Need(t)
	ca, err := os.ReadFile(filepath.Join(cluster.Dir, "ca.crt"))
	require.NoError(t, err)
	serving, err := tls.LoadX509KeyPair(filepath.Join(cluster.Dir, "apiserver.crt"), filepath.Join(cluster.Dir, "apiserver.key"))
	require.NoError(t, err)
	expiredPEM, expired := expiredCert(t)

	cases := []struct {
		name  string
		ca    []byte
		serve func(*countingListener) // nil: every connection is closed at once (the auditor down)
	}{
		{"down", ca, nil},
		{"slow", ca, func(ln *countingListener) {
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ln.requests.Add(1)
				select {
				case <-time.After(5 * time.Second):
				case <-r.Context().Done():
				}
			}), TLSConfig: &tls.Config{Certificates: []tls.Certificate{serving}}}
			go func() { _ = srv.ServeTLS(ln, "", "") }()
			t.Cleanup(func() { srv.Close() })
		}},
		{"expired certificate", expiredPEM, func(ln *countingListener) {
			srv := httptest.NewUnstartedServer(auditlog.NewAdmissionHandler(auditlog.NewStore(0), "", 0))
			srv.Listener, srv.TLS = ln, &tls.Config{Certificates: []tls.Certificate{expired}}
			srv.StartTLS()
			t.Cleanup(srv.Close)
		}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("inway-%d-%d", time.Now().Unix()%100000, i)
			out, err := kubectlAs("", "create", "namespace", ns)
			require.NoError(t, err, out)
			t.Cleanup(func() { _, _ = kubectlAs("", "delete", "namespace", ns, "--wait=false") })
			ln := listenCounting(t)
			if tc.serve == nil {
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						c.Close()
					}
				}()
			} else {
				tc.serve(ln)
			}
			kubectlApply(t, validatingWebhook("inway-"+ns, "https://"+ln.Addr().String()+"/api/v1/admission", tc.ca, []string{ns}, "Ignore", 1, skipKnownWriters))
			// Wait until the API server calls it (its informer picks the configuration up).
			require.Eventually(t, func() bool {
				_, _ = kubectlAs("", "-n", ns, "create", "configmap", fmt.Sprintf("probe-%d", time.Now().UnixNano()))
				return ln.calls() > 0
			}, 30*time.Second, 200*time.Millisecond, "the API server never called the webhook")

			before := ln.calls()
			cmd := cluster.Kubectl(context.Background(), "apply", "-f", "-")
			cmd.Stdin = strings.NewReader(configMaps(ns, 100))
			t0 := time.Now()
			out2, err := cmd.CombinedOutput()
			took := time.Since(t0)
			require.NoError(t, err, "%s", out2)
			assert.Equal(t, 100, strings.Count(string(out2), " created"), "%s", out2)
			calls := ln.calls() - before
			t.Logf("%s: 100 objects applied in %s; connections to the webhook and requests it read: %d", tc.name, took.Round(time.Millisecond), calls)
			assert.GreaterOrEqual(t, calls, int64(100), "the API server called the webhook for each create")
			assert.Less(t, took, 100*(time.Second+500*time.Millisecond), "each write waits the webhook's timeout at most")
		})
	}
}

// BenchmarkAdmissionWriteLatency times the API server's writes (ConfigMap updates, 100 per
// second, each in its own request) with the auditor's admission webhook off, then on (the
// handler the daemon serves, over TLS, recording into a store). Reported: p50/p99 of the
// write latency, off and on, and what the webhook adds at p50/p99.
func BenchmarkAdmissionWriteLatency(b *testing.B) {
	testcluster.Need(b)
	ca, err := os.ReadFile(filepath.Join(cluster.Dir, "ca.crt"))
	require.NoError(b, err)
	serving, err := tls.LoadX509KeyPair(filepath.Join(cluster.Dir, "apiserver.crt"), filepath.Join(cluster.Dir, "apiserver.key"))
	require.NoError(b, err)
	ns := fmt.Sprintf("admbench-%d", time.Now().UnixNano()%1000000)
	out, err := kubectlAs("", "create", "namespace", ns)
	require.NoError(b, err, out)
	b.Cleanup(func() { _, _ = kubectlAs("", "delete", "namespace", ns, "--wait=false") })
	cfg := rest.CopyConfig(cluster.Config)
	cfg.QPS, cfg.Burst = 1000, 1000
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(b, err)
	ctx := context.Background()
	const objects = 20
	for i := range objects {
		_, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%d", i)}}, metav1.CreateOptions{})
		require.NoError(b, err)
	}
	// writes runs n patches paced at 100 per second and returns their latencies.
	writes := func(n int) []time.Duration {
		var mu sync.Mutex
		var wg sync.WaitGroup
		lat := make([]time.Duration, 0, n)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := range n {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				_, err := cs.CoreV1().ConfigMaps(ns).Patch(ctx, fmt.Sprintf("w-%d", i%objects), types.MergePatchType,
					[]byte(fmt.Sprintf(`{"data":{"n":"%d"}}`, i)), metav1.PatchOptions{FieldManager: "bench"})
				d := time.Since(t0)
				if err != nil {
					b.Errorf("patch: %v", err)
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}()
		}
		wg.Wait()
		return lat
	}
	store := auditlog.NewStore(0)
	handler := auditlog.NewAdmissionHandler(store, "", 0)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go handler.Run(hctx)
	srv := httptest.NewUnstartedServer(handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	srv.StartTLS()
	defer srv.Close()

	const n = 500
	var off, on []time.Duration
	for b.Loop() {
		off = append(off, writes(n)...)
		name := "admbench-" + ns
		manifest := validatingWebhook(name, srv.URL+"/api/v1/admission", ca, []string{ns}, "Ignore", 2, skipKnownWriters)
		cmd := cluster.Kubectl(ctx, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v: %s", err, out)
		}
		seen := store.Len()
		require.Eventually(b, func() bool {
			writes(5)
			return store.Len() > seen
		}, 30*time.Second, 100*time.Millisecond, "the API server never called the webhook")
		before := store.Len()
		on = append(on, writes(n)...)
		b.ReportMetric(float64(store.Len()-before), "writes-recorded")
		_, _ = kubectlAs("", "delete", "validatingwebhookconfiguration", name)
	}
	b.ReportMetric(pct(off, 50).Seconds()*1000, "off-p50-ms")
	b.ReportMetric(pct(off, 99).Seconds()*1000, "off-p99-ms")
	b.ReportMetric(pct(on, 50).Seconds()*1000, "on-p50-ms")
	b.ReportMetric(pct(on, 99).Seconds()*1000, "on-p99-ms")
	b.ReportMetric((pct(on, 50)-pct(off, 50)).Seconds()*1000, "added-p50-ms")
	b.ReportMetric((pct(on, 99)-pct(off, 99)).Seconds()*1000, "added-p99-ms")
}
