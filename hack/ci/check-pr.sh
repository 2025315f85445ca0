#!/usr/bin/env bash
# Checks a pull request (GitHub) or a merge request (GitLab) with `auditor check`.
# It posts the report as one comment, updates that comment on each push, and exits as the check
# did: 0 the change passes, 1 it breaks a rule, 2 the check could not run. Any other failure of
# this script is also 2, never 1.
#
# The snippets in docs/ci run the target branch's copy of this file, so a change under review
# cannot edit the gate that judges it.
#
# Environment:
#   BASE_REF   the target branch (GitHub: github.base_ref; GitLab: CI_MERGE_REQUEST_TARGET_BRANCH_NAME)
#   AUDITOR    an auditor binary to use; without it the auditor is built from the target branch,
#              so a change under review never checks itself
#   FORGE      github or gitlab; detected from GITHUB_ACTIONS or GITLAB_CI
#   GitHub:    GITHUB_TOKEN, GITHUB_API_URL, GITHUB_REPOSITORY, PR_NUMBER; GITHUB_SERVER_URL and
#              GITHUB_RUN_ID link a cut report to its run
#   GitLab:    AUDITOR_GITLAB_TOKEN (a project access token with the api scope), CI_API_V4_URL,
#              CI_PROJECT_ID, CI_MERGE_REQUEST_IID; CI_JOB_URL links a cut report to its job
#   AUDITOR_COMMENT_AUTHOR  the login that owns the comment. Without it, it is the token's user
#              (GET /user); a GitHub App token such as GITHUB_TOKEN cannot read /user, and then it
#              is github-actions[bot]. Comments by anyone else are never edited.
# Without a token the report is only printed. A failed post is a warning: the exit code stays the
# check's, so a pull request from a fork (read-only token) still fails on a violation.
set -euo pipefail

marker='<!-- auditor-check -->'
work=
finished=

# cleanup removes the work files. Before the end, any failure (an unset variable under set -u, a
# failed command under set -e) is an error: exit 2, since 1 would read as a finding.
# shellcheck disable=SC2317 # the EXIT trap runs it
cleanup() {
  local rc=$?
  if [[ -n $work ]]; then
    if [[ -d $work/base ]]; then git worktree remove --force "$work/base" >/dev/null 2>&1 || true; fi
    rm -rf "$work"
  fi
  if [[ -z $finished && $rc != 0 && $rc != 2 ]]; then
    echo "check-pr.sh: stopped by an error (exit $rc): the check did not run to its end" >&2
    rc=2
  fi
  exit "$rc"
}
trap cleanup EXIT

# fail MESSAGE: the check cannot run.
fail() {
  echo "check-pr.sh: $*" >&2
  exit 2
}

# need WHY NAME...: each variable must be set and not empty.
need() {
  local why=$1 name
  shift
  for name; do
    [[ -n ${!name:-} ]] || fail "$name is not set ($why)"
  done
}

need "set it to the target branch" BASE_REF
forge=${FORGE:-}
if [[ -z $forge ]]; then
  if [[ -n ${GITHUB_ACTIONS:-} ]]; then forge=github; elif [[ -n ${GITLAB_CI:-} ]]; then forge=gitlab; fi
fi

# Each forge differs in its token, its comments URL, where one comment lives, the method that
# updates it, where a comment names its author and how long a comment may be.
token=
case $forge in
github)
  token=${GITHUB_TOKEN:-}
  if [[ -n $token ]]; then
    need "GitHub needs it to post the report" GITHUB_REPOSITORY PR_NUMBER
    api=${GITHUB_API_URL:-https://api.github.com}
    list=$api/repos/$GITHUB_REPOSITORY/issues/$PR_NUMBER/comments
    item=$api/repos/$GITHUB_REPOSITORY/issues/comments update=PATCH
    auth="Authorization: Bearer $token"
    user=$api/user login=.login author_of=.user.login bot='github-actions[bot]'
    max=65536 run_url=
    if [[ -n ${GITHUB_RUN_ID:-} ]]; then
      run_url=${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY/actions/runs/$GITHUB_RUN_ID
    fi
  fi
  ;;
gitlab)
  token=${AUDITOR_GITLAB_TOKEN:-}
  if [[ -n $token ]]; then
    need "GitLab needs it to post the report" CI_API_V4_URL CI_PROJECT_ID CI_MERGE_REQUEST_IID
    list=$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes
    item=$list update=PUT
    auth="PRIVATE-TOKEN: $token"
    user=$CI_API_V4_URL/user login=.username author_of=.author.username bot=
    max=1000000 run_url=${CI_JOB_URL:-}
  fi
  ;;
"") ;;
*) fail "FORGE=$forge: want github or gitlab" ;;
esac

work=$(mktemp -d)

base="origin/$BASE_REF"
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
  git fetch -q origin "+refs/heads/$BASE_REF:refs/remotes/origin/$BASE_REF" ||
    fail "cannot fetch the target branch $BASE_REF from origin"
fi

auditor=${AUDITOR:-}
if [[ -z $auditor ]]; then
  echo "building the auditor from $base" >&2
  git worktree add -q --detach "$work/base" "$base" || fail "cannot check out $base"
  # -trimpath: the build cache does not depend on where the work tree is.
  (cd "$work/base" && go build -trimpath -o "$work/auditor" ./cmd/auditor) || fail "cannot build the auditor from $base"
  auditor=$work/auditor
fi

status=0
"$auditor" check --base "$base" --head HEAD -o markdown >"$work/report.md" || status=$?
cat "$work/report.md"
if ((status > 1)); then
  echo "auditor check could not run (exit $status)" >&2
  finished=1
  exit "$status"
fi

# body: the comment as {"body": ...}, the marker first. A report longer than the forge takes is
# cut at a line, a code block left open is closed, and a last line says where the full report is.
body() {
  local where="the log of this CI job"
  [[ -z $run_url ]] || where="the log of [this CI run]($run_url)"
  { echo "$marker"; cat "$work/report.md"; } |
    jq -Rs --argjson max "$max" --arg note $'\n\n**The report is cut here: it is longer than a comment can be.** The full report is in '"$where." '
      if length <= $max then {body: .} else
        .[:([$max - ($note | length) - 4, 0] | max)] as $s
        | $s[:($s | rindex("\n") // ($s | length))] as $cut
        | (if ([$cut | split("\n")[] | select(startswith("```"))] | length) % 2 == 1 then "\n```" else "" end) as $close
        | {body: ($cut + $close + $note)}
      end'
}

# post METHOD URL: sends the comment.
post() {
  curl -fsS -o /dev/null -X "$1" -H "$auth" -H 'Content-Type: application/json' --data-binary @"$work/comment.json" "$2"
}

# author: the login whose comments this script may update.
author() {
  if [[ -n ${AUDITOR_COMMENT_AUTHOR:-} ]]; then
    echo "$AUDITOR_COMMENT_AUTHOR"
    return
  fi
  local code
  code=$(curl -sS -o "$work/user.json" -w '%{http_code}' -H "$auth" "$user") || return 1
  if [[ $code == 403 && -n $bot ]]; then
    echo "$bot" # an app's token (GITHUB_TOKEN) cannot read /user; Actions posts as its bot
  elif [[ $code == 200 ]]; then
    jq -er "$login // empty" "$work/user.json"
  else
    echo "GET $user: HTTP $code" >&2
    return 1
  fi
}

# comments: every comment of the pull request, one JSON object a line. It follows the pages while
# the forge says there is another: GitHub in a Link header with rel="next", GitLab in X-Next-Page.
comments() {
  local page=1
  while :; do
    curl -fsS -D "$work/headers" -o "$work/page.json" -H "$auth" "$list?per_page=100&page=$page" || return 1
    jq -c '.[]' "$work/page.json" || return 1
    grep -qiE '^link:.*rel="next"|^x-next-page: *[0-9]' "$work/headers" || return 0
    page=$((page + 1))
    if ((page > 1000)); then
      echo "more than 1000 pages of comments" >&2
      return 1
    fi
  done
}

# existing: the id of the comment this script posted before, if any.
existing() {
  local who
  who=$(author) || return 1
  comments | jq -rs --arg m "$marker" --arg who "$who" \
    "[.[] | select(((.body // \"\") | startswith(\$m)) and $author_of == \$who)][0].id // empty"
}

# comment: posts the report, or updates the one posted before.
comment() {
  if [[ -z $forge ]]; then
    echo "no forge detected (set FORGE=github or gitlab): the report is not posted" >&2
    return 0
  fi
  [[ -n $token ]] || { echo "no $forge token: the report is not posted" >&2; return 0; }
  body >"$work/comment.json" || return 1
  local id
  id=$(existing) || return 1
  if [[ -n $id ]]; then
    post "$update" "$item/$id"
  elif ((status != 0)); then
    post POST "$list"
  fi
}

# A passing change posts nothing new; it updates an earlier report so that it no longer shows
# violations that are fixed.
comment || echo "warning: the report could not be posted" >&2
finished=1
exit "$status"
