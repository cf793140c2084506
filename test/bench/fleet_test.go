package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

func TestParseSample(t *testing.T) {
	tests := map[string]struct {
		line string
		want metricSample
		ok   bool
	}{
		"no labels":          {"process_cpu_seconds_total 12.5", metricSample{name: "process_cpu_seconds_total", labels: map[string]string{}, value: 12.5}, true},
		"labels":             {`rest_client_requests_total{code="200",host="10.245.0.1:6443",method="GET"} 1234`, metricSample{name: "rest_client_requests_total", labels: map[string]string{"code": "200", "host": "10.245.0.1:6443", "method": "GET"}, value: 1234}, true},
		"timestamp":          {`grpc_server_handled_total{grpc_code="OK"} 7 1700000000000`, metricSample{name: "grpc_server_handled_total", labels: map[string]string{"grpc_code": "OK"}, value: 7}, true},
		"exponent":           {"process_resident_memory_bytes 5.4525952e+07", metricSample{name: "process_resident_memory_bytes", labels: map[string]string{}, value: 5.4525952e+07}, true},
		"no value":           {"lonely_metric", metricSample{}, false},
		"unclosed labels":    {`broken{a="b" 1`, metricSample{}, false},
		"value not a number": {"x{} abc", metricSample{}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := parseSample(tt.line)
			if ok != tt.ok {
				t.Fatalf("ok %v, want %v (%+v)", ok, tt.ok, got)
			}
			if ok && !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestFleetMemberBack(t *testing.T) {
	for pods, wantErr := range map[string]bool{
		"new=True":              false,
		"old=True":              true,
		"new=False":             true,
		"":                      true,
		"old=True new=False":    true,
		"new=True another=True": true,
	} {
		if err := fleetMemberBack(pods, "old"); (err != nil) != wantErr {
			t.Errorf("%q: error %v, want error %v", pods, err, wantErr)
		}
	}
}

func TestScrapeSeries(t *testing.T) {
	body := "# HELP x a counter\n# TYPE x counter\nx{a=\"b\"} 3\n\nsteward_members 5\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(body)) }))
	defer srv.Close()
	got, err := scrapeSeries(context.Background(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	want := []metricSample{{name: "x", labels: map[string]string{"a": "b"}, value: 3}, {name: "steward_members", labels: map[string]string{}, value: 5}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	size, series, steward, err := scrape(context.Background(), srv.URL)
	if err != nil || size != len(body) || series != 2 || steward != 1 {
		t.Fatalf("scrape: size %d series %d steward %d err %v, want %d 2 1", size, series, steward, err, len(body))
	}
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	if _, err := scrapeSeries(context.Background(), down.URL); err == nil {
		t.Fatal("an HTTP 503 was not an error")
	}
}

// TestLoopbackMemberArgs: the one flag list of the benches' host etcd processes.
func TestLoopbackMemberArgs(t *testing.T) {
	got := loopbackMemberArgs(2, "/d", "http://127.0.0.1:1", "http://127.0.0.1:2", "m0=a,m1=b,m2=c", "existing", "tok")
	want := []string{"--name=m2", "--data-dir=/d/2", "--listen-client-urls=http://127.0.0.1:1", "--advertise-client-urls=http://127.0.0.1:1",
		"--listen-peer-urls=http://127.0.0.1:2", "--initial-advertise-peer-urls=http://127.0.0.1:2",
		"--initial-cluster=m0=a,m1=b,m2=c", "--initial-cluster-state=existing", "--initial-cluster-token=tok"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags %v, want %v", got, want)
	}
}
