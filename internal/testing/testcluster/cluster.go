// Package testcluster is the test harness around internal/platform/localcluster: one real control
// plane per test package (Main), tests that skip or fail without one (Need, NeedTool), a namespace
// per test and a Prometheus for rule tests. Production code uses localcluster itself.
package testcluster

import (
	"context"

	"github.com/llm-gitops/platform/internal/platform/localcluster"
)

// Cluster is a running control plane of a test package.
type Cluster struct {
	*localcluster.Cluster
}

// Start brings up a control plane (see localcluster.Start).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	c, err := localcluster.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Cluster{c}, nil
}

// The local cluster's names, as tests have always spelt them.
type (
	// Options say what to run and where.
	Options = localcluster.Options
	// Member is a further cluster registered in the first one's Argo CD.
	Member = localcluster.Member
	// Binaries locates the executables the cluster runs.
	Binaries = localcluster.Binaries
	// Person is a token user the cluster knows besides the admin.
	Person = localcluster.Person
	// Syncer applies objects as Argo CD's sync does.
	Syncer = localcluster.Syncer
	// State is a detached cluster's record.
	State = localcluster.State
	// CRDSource is one upstream module's CRDs.
	CRDSource = localcluster.CRDSource
	// ArgoCDAccount is a local Argo CD user of argocd-server (Cluster.StartArgoCDServer).
	ArgoCDAccount = localcluster.ArgoCDAccount
	// ArgoCDServer is argocd-server running beside the application controller.
	ArgoCDServer = localcluster.ArgoCDServer
)

// Constants of the local cluster.
const (
	AdminToken         = localcluster.AdminToken
	ReaderToken        = localcluster.ReaderToken
	ReaderUser         = localcluster.ReaderUser
	AuditWebhookToken  = localcluster.AuditWebhookToken
	AuditWebhookUser   = localcluster.AuditWebhookUser
	ArgoCDNamespace    = localcluster.ArgoCDNamespace
	AppNamespacesGlob  = localcluster.AppNamespacesGlob
	ArgoManager        = localcluster.ArgoManager
	TrackingAnnotation = localcluster.TrackingAnnotation
	KwokAnnotation     = localcluster.KwokAnnotation
	Toolchain          = localcluster.Toolchain
	KubernetesVersion  = localcluster.KubernetesVersion
	EtcdVersion        = localcluster.EtcdVersion
	ArgoCDVersion      = localcluster.ArgoCDVersion
	KwokVersion        = localcluster.KwokVersion
	KustomizeVersion   = localcluster.KustomizeVersion
	HelmVersion        = localcluster.HelmVersion
	MiniredisVersion   = localcluster.MiniredisVersion
	PrometheusVersion  = localcluster.PrometheusVersion
)

// Variables and functions of the local cluster.
var (
	People              = localcluster.People
	ApplicationGVR      = localcluster.ApplicationGVR
	NotExercised        = localcluster.NotExercised
	UpstreamCRDs        = localcluster.UpstreamCRDs
	ErrNoBinaries       = localcluster.ErrNoBinaries
	FindBinaries        = localcluster.FindBinaries
	NewSyncer           = localcluster.NewSyncer
	ModuleDir           = localcluster.ModuleDir
	LoadUpstreamCRDs    = localcluster.LoadUpstreamCRDs
	InstallUpstreamCRDs = localcluster.InstallUpstreamCRDs
	Running             = localcluster.Running
	Down                = localcluster.Down
)
