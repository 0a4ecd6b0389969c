"""The workspace API's credit and usage routes (SPEC §9), at the paths they had under retention."""

from django.urls import path

from credits.api import views

urlpatterns = [
    path("credits", views.CreditsView.as_view()),
    path("credits/member-quotas/<id:member_id>", views.MemberQuotaView.as_view()),
    path("credits/role-quotas/<str:role>", views.RoleQuotaView.as_view()),
    path("usage", views.UsageView.as_view()),
]
