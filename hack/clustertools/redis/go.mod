// Module redis builds an in-memory Redis (github.com/alicebob/miniredis/v2) for Argo CD's controller and
// repo-server cache, where the distribution's redis-server is absent.
module example.local/clustertools/redis

go 1.27.3

require github.com/alicebob/miniredis/v2 v2.40.0

require github.com/yuin/gopher-lua v1.1.1 // indirect
