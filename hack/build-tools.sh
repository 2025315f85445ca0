#!/usr/bin/env bash
# Builds the local cluster's binaries from their Go modules into bin/, once per version.
#   kube-apiserver, kube-scheduler, kube-controller-manager  (k8s.io/kubernetes)  -> bin/k8s-$K8S_VERSION/
#   etcd                                                      (go.etcd.io/etcd)    -> bin/etcd-$ETCD_VERSION/
#   argocd (application-controller, repo-server by name)      (argo-cd/v3)         -> bin/argocd-$ARGOCD_VERSION/
#   kwok                                                      (sigs.k8s.io/kwok)   -> bin/kwok-$KWOK_VERSION/
#   kustomize (the CLI the repo-server runs)                  (kustomize/v5)       -> bin/kustomize-$KUSTOMIZE_VERSION/
#   helm (the CLI the repo-server runs for charts)            (helm/v4)            -> bin/helm-$HELM_VERSION/
#   redis (in-memory, miniredis; used when redis-server is absent)                  -> bin/redis-$MINIREDIS_VERSION/
#   prometheus, promtool (no service discovery; tests query it) (prometheus)        -> bin/prometheus-$PROMETHEUS_VERSION/
# A cold build takes 8-15 minutes on 2 cores (~3 GB of Go build cache, ~1 GB of modules); later runs skip it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.7.3}
ARGOCD_VERSION=${ARGOCD_VERSION:-v3.6.1}
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}
KUSTOMIZE_VERSION=${KUSTOMIZE_VERSION:-v5.8.3}
HELM_VERSION=${HELM_VERSION:-v4.3.1}
MINIREDIS_VERSION=${MINIREDIS_VERSION:-v2.40.0}
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.313.2}
kube_dir="$root/bin/k8s-$K8S_VERSION"
etcd_dir="$root/bin/etcd-$ETCD_VERSION"

# progress turns `go build -v` package lines into a heartbeat with elapsed time.
progress() {
  local start=$SECONDS n=0 line
  while IFS= read -r line; do
    case "$line" in
      "# "*|*.go:[0-9]*|go:*|*"cannot "*) echo "$line" ;;
      *) n=$((n+1)); if (( n % 200 == 0 )); then echo "    ... $n packages compiled, $((SECONDS-start))s elapsed"; fi ;;
    esac
  done
}

build() { # name dir module-dir ldflags packages...
  local name=$1 out=$2 moddir=$3 ldflags=$4; shift 4
  local start=$SECONDS
  echo ">>> building $name into ${out#$root/} (cold: several minutes on 2 cores; progress below)"
  mkdir -p "$out.partial"
  ( cd "$moddir" && go build -v -trimpath -ldflags "$ldflags" -o "$out.partial/" "$@" ) 2>&1 | progress
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "!!! building $name failed"; exit 1; }
  rm -rf "$out" && mv "$out.partial" "$out"
  echo ">>> $name built in $((SECONDS-start))s"
}

if [ -x "$etcd_dir/etcd" ]; then
  echo ">>> etcd $ETCD_VERSION present in ${etcd_dir#$root/}"
else
  build "etcd $ETCD_VERSION" "$etcd_dir" "$root/hack/clustertools/etcd" "-s -w" .
fi

if [ -x "$kube_dir/kube-apiserver" ] && [ -x "$kube_dir/kube-scheduler" ] && [ -x "$kube_dir/kube-controller-manager" ]; then
  echo ">>> kube-apiserver, kube-scheduler, kube-controller-manager $K8S_VERSION present in ${kube_dir#$root/}"
else
  minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  build "kube-apiserver, kube-scheduler, kube-controller-manager $K8S_VERSION" "$kube_dir" "$root/hack/clustertools/kube" "$ld" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager
fi

# The versions below are the ones the wrapper modules under hack/clustertools pin (go.mod tool lines).
argocd_dir="$root/bin/argocd-$ARGOCD_VERSION"
if [ -x "$argocd_dir/argocd" ]; then
  echo ">>> argocd $ARGOCD_VERSION present in ${argocd_dir#$root/}"
else
  build "argocd $ARGOCD_VERSION (application-controller, repo-server)" "$argocd_dir" "$root/hack/clustertools/argocd" \
    "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${ARGOCD_VERSION#v}" github.com/argoproj/argo-cd/v3/cmd
  mv "$argocd_dir/cmd" "$argocd_dir/argocd"
  for n in argocd-application-controller argocd-repo-server; do ln -sf argocd "$argocd_dir/$n"; done
fi

tool() { # name version dir package binary [ldflags]
  local d="$root/bin/$1-$2"
  if [ -x "$d/$5" ]; then echo ">>> $1 $2 present in ${d#$root/}"; return; fi
  build "$1 $2" "$d" "$root/hack/clustertools/$3" "-s -w ${6:-}" "$4"
}
tool kwok "$KWOK_VERSION" kwok sigs.k8s.io/kwok/cmd/kwok kwok
tool kustomize "$KUSTOMIZE_VERSION" kustomize sigs.k8s.io/kustomize/kustomize/v5 kustomize
tool redis "$MINIREDIS_VERSION" redis . redis
tool helm "$HELM_VERSION" helm helm.sh/helm/v4/cmd/helm helm "-X helm.sh/helm/v4/internal/version.version=$HELM_VERSION"

prom_dir="$root/bin/prometheus-$PROMETHEUS_VERSION"
if [ -x "$prom_dir/prometheus" ] && [ -x "$prom_dir/promtool" ]; then
  echo ">>> prometheus, promtool $PROMETHEUS_VERSION present in ${prom_dir#$root/}"
else
  build "prometheus, promtool $PROMETHEUS_VERSION" "$prom_dir" "$root/hack/clustertools/prometheus" "-s -w" \
    -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
fi
