package healthgate

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/clusterrebootd/clusterrebootd/lib/gate"
)

// promStub answers /api/v1/query like Prometheus, with a canned answer, and
// records the queries it was asked.
type promStub struct {
	mu      sync.Mutex
	status  int
	body    string
	token   string // required bearer token, "" = none
	queries []string
}

func (p *promStub) set(status int, body string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status, p.body = status, body
}

func (p *promStub) lastQuery() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queries) == 0 {
		return ""
	}
	return p.queries[len(p.queries)-1]
}

func (p *promStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r.URL.Path != "/api/v1/query" || r.Method != http.MethodGet {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if p.token != "" && r.Header.Get("Authorization") != "Bearer "+p.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	p.queries = append(p.queries, r.URL.Query().Get("query"))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(p.status)
	fmt.Fprint(w, p.body)
}

const (
	promNone   = `{"status":"success","data":{"resultType":"vector","result":[]}}`
	promFiring = `{"status":"success","data":{"resultType":"vector","result":[` +
		`{"metric":{"__name__":"ALERTS","alertname":"DiskFull","alertstate":"firing","instance":"a"},"value":[1,"1"]},` +
		`{"metric":{"__name__":"ALERTS","alertname":"NodeDown","alertstate":"firing","instance":"b"},"value":[1,"1"]},` +
		`{"metric":{"__name__":"ALERTS","alertname":"DiskFull","alertstate":"firing","instance":"c"},"value":[1,"1"]}]}}`
	promSpaced = `{ "status": "success", "data": { "resultType": "vector", "result": [ ] } }`
	promError  = `{"status":"error","errorType":"bad_data","error":"parse error"}`
	promScalar = `{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}`
)

func TestAlerts(t *testing.T) {
	stub := &promStub{status: http.StatusOK, body: promNone}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	dead := "http://" + tcpDown(t)

	base := []string{"GATE_ETCD=no", "GATE_PROM_URL=" + srv.URL + "/"}
	for _, tc := range []struct {
		name   string
		status int
		body   string
		env    []string
		code   int
		wants  []string
	}{
		{"none firing", 200, promNone, nil, exitOK, []string{"ok: pre-lock on node-1: alerts: none firing"}},
		{"none firing, spaced JSON", 200, promSpaced, nil, exitOK, []string{"alerts: none firing"}},
		{"three firing", 200, promFiring, nil, exitFailed, []string{"refused: alerts: 3 firing: DiskFull (x2), NodeDown"}},
		{"query error", 200, promError, nil, exitFailed, []string{"refused: alerts: unexpected answer from Prometheus"}},
		{"not a vector", 200, promScalar, []string{"GATE_PROM_QUERY='vector(1)'"}, exitFailed, []string{"unexpected answer"}},
		{"server error", 500, "oops", nil, exitFailed, []string{"refused: alerts: Prometheus unreachable: HTTP 500"}},
		{"server error allowed", 503, "not ready", []string{"GATE_PROM_ON_ERROR=allow"}, exitOK,
			[]string{"alerts: Prometheus unreachable (HTTP 503), allowed by GATE_PROM_ON_ERROR=allow"}},
		{"bad request never allowed", 400, promError, []string{"GATE_PROM_ON_ERROR=allow"}, exitFailed,
			[]string{"refused: alerts: Prometheus answered HTTP 400"}},
		{"unreachable", 200, promNone, []string{"GATE_PROM_URL=" + dead}, exitFailed, []string{"refused: alerts: Prometheus unreachable: "}},
		{"unreachable allowed", 200, promNone, []string{"GATE_PROM_URL=" + dead, "GATE_PROM_ON_ERROR=allow"}, exitOK,
			[]string{"allowed by GATE_PROM_ON_ERROR=allow"}},
		{"bad on-error value", 200, promNone, []string{"GATE_PROM_ON_ERROR=maybe"}, exitConfig,
			[]string{"GATE_PROM_ON_ERROR must be fail or allow"}},
		{"bad ignore name", 200, promNone, []string{"GATE_PROM_IGNORE='Watch.*'"}, exitConfig,
			[]string{"GATE_PROM_IGNORE: 'Watch.*' is not an alert name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stub.set(tc.status, tc.body)
			r := newRig(t, append(append([]string(nil), base...), tc.env...)...)
			r.expect(gate.PhasePreLock, tc.code, tc.wants...)
		})
	}

	// The query: firing alerts, the operator's matchers, minus the ignore list.
	stub.set(200, promNone)
	r := newRig(t, append(base, `GATE_PROM_MATCHERS="severity=~\"critical|page\",cluster=\"$CLUSTER\""`)...)
	r.expect(gate.PhasePreLock, exitOK)
	want := `ALERTS{alertstate="firing",severity=~"critical|page",cluster="test",alertname!~"Watchdog|InfoInhibitor"}`
	if got := stub.lastQuery(); got != want {
		t.Fatalf("query\n got %s\nwant %s", got, want)
	}
	r.setEnv(append(base, "GATE_PROM_IGNORE=")...)
	r.expect(gate.PhasePreLock, exitOK)
	if got := stub.lastQuery(); got != `ALERTS{alertstate="firing"}` {
		t.Fatalf("query without ignore list: %s", got)
	}
	r.setEnv(append(base, `GATE_PROM_QUERY='ALERTS{alertstate="firing",team="db"} > 0'`)...)
	r.expect(gate.PhasePreLock, exitOK)
	if got := stub.lastQuery(); got != `ALERTS{alertstate="firing",team="db"} > 0` {
		t.Fatalf("own query: %s", got)
	}
	// Not asked after boot unless configured.
	n := len(stub.queries)
	r.expect(gate.PhasePostBoot, exitOK, "no check enabled")
	if len(stub.queries) != n {
		t.Fatal("alerts queried in post-boot")
	}

	// A bearer token from a header file (never on the command line).
	stub.token = "t0ken"
	r.setEnv(base...)
	r.expect(gate.PhasePreLock, exitFailed, "HTTP 401")
	hdr := filepath.Join(t.TempDir(), "prom-headers")
	writeFile(t, hdr, "Authorization: Bearer t0ken\n", 0o600)
	r.setEnv(append(base, "GATE_PROM_HEADER_FILE="+shellQuote(hdr))...)
	r.expect(gate.PhasePreLock, exitOK, "alerts: none firing")
}
