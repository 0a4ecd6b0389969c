from django.urls import path

from retention.api import views

urlpatterns = [
    path("ask-history/deletion-receipts", views.DeletionReceiptsView.as_view(), name="deletion-receipts"),
    path(
        "ask-history/deletion-receipts/verify",
        views.DeletionReceiptsVerifyView.as_view(),
        name="deletion-receipts-verify",
    ),
    path("ask-history/lifecycle", views.LifecycleView.as_view(), name="lifecycle"),
]
