"""URL routes: admin, liveness, readiness, metrics and the Wire bridge."""

from django.contrib import admin
from django.urls import include, path

from jeeves import views
from knowledge.admin import dashboard_view

urlpatterns = [
    # The review desk's dashboard, behind the admin's login (staff only).
    path("admin/dashboard/", admin.site.admin_view(dashboard_view), name="jeeves-dashboard"),
    path("admin/", admin.site.urls),
    path("healthz", views.healthz, name="healthz"),
    path("readyz", views.readyz, name="readyz"),
    path("metrics", views.metrics, name="metrics"),
    path("wire/", include("wire_bridge.urls")),
]
