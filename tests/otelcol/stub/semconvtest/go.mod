// Empty stand-in for a test-only dependency of k8sattributesprocessor that the
// Go module proxy does not serve at any version (403). Only `go mod tidy` in
// the builder's generated module looks at it; nothing in the binary uses it.
module github.com/open-telemetry/opentelemetry-collector-contrib/pkg/semconvtest

go 1.25
