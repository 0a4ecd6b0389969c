from django.urls import path

from retention.api import credits_views, views

urlpatterns = [
    path("ask-history/deletion-receipts", views.DeletionReceiptsView.as_view(), name="deletion-receipts"),
    path("ask-history/deletion-receipts/verify", views.DeletionReceiptsVerifyView.as_view(), name="deletion-receipts-verify"),
    path("ask-history/lifecycle", views.LifecycleView.as_view(), name="lifecycle"),
    # credits (SPEC §9)
    path("credits", credits_views.CreditsView.as_view()),
    path("credits/member-quotas/<id:member_id>", credits_views.MemberQuotaView.as_view()),
    path("credits/role-quotas/<str:role>", credits_views.RoleQuotaView.as_view()),
    path("usage", credits_views.UsageView.as_view()),
]
