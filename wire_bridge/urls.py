from django.urls import path

from wire_bridge import views

urlpatterns = [
    path("events", views.sidecar_events, name="wire-sidecar-events"),
]
