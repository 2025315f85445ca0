#!/usr/bin/env bash
# make demo: the main job end to end on a local real cluster and a local Git repository.
#  1. a real kube-apiserver + etcd (+ scheduler, controller-manager) with upstream CRDs
#  2. this repository pushed to a local bare Git repository, as a Git server would hold it
#  3. the prod overlay synced the way Argo CD does (server-side apply as argocd-controller)
#  4. manual kubectl edits, then the auditor's drift report naming field, values, manager, time
set -eu # no pipefail: output is cut with head, and a cut pipe is not a failure
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
work=$(mktemp -d /tmp/auditor-demo.XXXXXX)
cluster="$work/cluster"
tc() { go run ./cmd/testcluster "$@"; }
cleanup() { tc down --dir "$cluster" >/dev/null 2>&1 || true; [ -n "${KEEP_DEMO:-}" ] || rm -rf "$work"; }
trap cleanup EXIT
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Start a real control plane (etcd + kube-apiserver + scheduler + controller-manager)"
tc up --dir "$cluster" | tail -2
export KUBECONFIG="$cluster/kubeconfig"
kubectl version 2>/dev/null | grep -i server
echo "upstream CRDs installed:"
kubectl get crd -o name | sed 's|customresourcedefinition.apiextensions.k8s.io/|  |' | sort | tr "\n" " " | fmt -w 110

step "2. A local Git repository holding this project (bare, like a Git server)"
git init -q --bare -b main "$work/platform.git"
if git rev-parse -q --verify HEAD >/dev/null; then
  git push -q "$work/platform.git" HEAD:refs/heads/main
else
  echo "no commit in this checkout"; exit 1
fi
repo="file://$work/platform.git"
git --git-dir "$work/platform.git" log --oneline -1 main

step "3. Sync overlays/prod as Argo CD does: server-side apply, field manager argocd-controller"
tc sync --dir "$cluster" --env prod --repo "$repo" --revision main
kubectl get application -n argocd llm-prod -o jsonpath='{"Application llm-prod: sync.revision="}{.status.sync.revision}{"\n"}'
kubectl get deploy,sts,cronjob,scaledobject,httproute -A -l app.kubernetes.io/part-of=llm-platform 2>/dev/null | head -20

step "4. Manual edits with the real kubectl"
printf '#!/bin/sh\nsed -i "s/^  replicas: 1$/  replicas: 3/" "$1"\n' > "$work/editor" && chmod +x "$work/editor"
echo '$ kubectl -n llm-rag edit statefulset qdrant      (an editor script turns replicas 1 into 3)'
EDITOR="$work/editor" kubectl -n llm-rag edit statefulset qdrant
echo '$ kubectl -n llm-api set env deployment/rag-api LOG_LEVEL=debug'
kubectl -n llm-api set env deployment/rag-api LOG_LEVEL=debug
echo '$ kubectl -n llm-inference set image deployment/vllm-llama vllm=vllm/vllm-openai:v0.11.1'
kubectl -n llm-inference set image deployment/vllm-llama vllm=vllm/vllm-openai:v0.11.1
echo "managedFields of statefulset/qdrant now:"
kubectl -n llm-rag get sts qdrant --show-managed-fields -o jsonpath='{range .metadata.managedFields[*]}{"  "}{.manager}{"\t"}{.operation}{"\t"}{.subresource}{"\t"}{.time}{"\n"}{end}'

if bin/auditor diff --help >/dev/null 2>&1; then
  step "5. auditor diff --env prod: what Git says against what runs, and who changed it"
  set +e
  bin/auditor diff --env prod --repo "$repo" --kubeconfig "$KUBECONFIG"
  code=$?
  set -e
  echo "(exit code $code: 0 in sync, 1 drift, >1 error)"
fi

step "6. The daemon: auditor serve watches the cluster and posts drift to chat"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo 18099)
go build -o "$work/testcluster" ./cmd/testcluster
"$work/testcluster" receive --listen "127.0.0.1:$port" > "$work/chat.log" 2>&1 &
recv=$!
printf 'http://127.0.0.1:%s/hooks/demo' "$port" > "$work/mm-url"
cat > "$work/auditor.yaml" <<CFG
repo: $repo
envs: [prod]
kubeconfig: $KUBECONFIG
listen: 127.0.0.1:0
stateDir: $work/state
foldWindow: 2s
sinks:
  - name: oncall
    mattermost: {urlFile: $work/mm-url}
CFG
bin/auditor serve --config "$work/auditor.yaml" > "$work/daemon.log" 2>&1 &
daemon=$!
trap 'kill $daemon $recv 2>/dev/null || true; cleanup' EXIT
# Wait for a positive signal, not a fixed time: the first message in the receiver's log.
wait_messages() {
  for _ in $(seq 1 300); do
    [ "$(grep -c 'chat message received' "$work/chat.log" 2>/dev/null || true)" -ge "$1" ] && return 0
    sleep 0.1
  done
  echo "(no chat message $1 after 30 s; daemon log:)"; tail -20 "$work/daemon.log"
}
wait_messages 1
echo "the daemon reported the drift already present (first message):"
cat "$work/chat.log" | head -30
echo
echo '$ kubectl -n llm-inference annotate deployment/vllm-qwen-canary oncall/note="paused by hand"'
kubectl -n llm-inference annotate deployment/vllm-qwen-canary oncall/note="paused by hand" >/dev/null
wait_messages 2
echo "chat now (the second message; drift within foldWindow of the first is folded until the window ends):"
awk '/┌──/{n++} n>=2' "$work/chat.log" | head -40
kill $daemon $recv 2>/dev/null || true
wait $daemon $recv 2>/dev/null || true

step "7. auditor check: what a pull request to prod would be told (HEAD~1 → HEAD of this repo)"
set +e
bin/auditor check --base HEAD~1 --head HEAD | grep -E '^==|VIOLATION' | head -12
set -e

step "Done; stopping the cluster"
