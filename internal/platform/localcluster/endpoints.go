package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// writeKubeconfig writes an admin kubeconfig with context "testcluster".
func writeKubeconfig(path, server string, ca []byte, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["testcluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.AuthInfos[ReaderUser] = &clientcmdapi.AuthInfo{Token: ReaderToken}
	cfg.Contexts["testcluster"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: "admin", Namespace: "default"}
	cfg.Contexts["reader"] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: ReaderUser, Namespace: "default"}
	for _, p := range People {
		cfg.AuthInfos[p.Name] = &clientcmdapi.AuthInfo{Token: p.Token}
		cfg.Contexts[p.Name] = &clientcmdapi.Context{Cluster: "testcluster", AuthInfo: p.Name, Namespace: "default"}
	}
	cfg.CurrentContext = "testcluster"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// waitHTTP polls url until it answers 200, the process exits, or the timeout passes.
func waitHTTP(ctx context.Context, p *process, url string, cfg *rest.Config, timeout time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second}
	switch {
	case cfg != nil:
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(cfg.CAData)
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	case strings.HasPrefix(url, "https://"):
		// scheduler and controller-manager serve /healthz with self-signed certificates of their own
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // loopback health probe
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if err := p.exited(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", p.name, err)
		}
		if cfg != nil {
			req.Header.Set("Authorization", "Bearer "+cfg.BearerToken)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, body)
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (%s); log tail:\n%s", p.name, timeout, last, tailFile(p.log.Name(), 15))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", p.name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
