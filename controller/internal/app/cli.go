package app

import (
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
)

// RouteLogs sends every log of the process through log: controller-runtime's, and klog's
// (client-go and leader election log through klog, which otherwise writes its own text
// lines to stderr, between the JSON ones).
func RouteLogs(log *slog.Logger) {
	ctrl.SetLogger(logr.FromSlogHandler(log.Handler()))
	klog.SetSlogLogger(log)
}
