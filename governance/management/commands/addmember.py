import json

from django.core.management.base import BaseCommand, CommandError

from core.errors import ApiError
from governance.actions import add_member
from governance.models import Workspace
from governance.permissions import Role


class Command(BaseCommand):
    help = "Add a user (created on first mention) to a workspace with a role."

    def add_arguments(self, parser):
        parser.add_argument("workspace_id", type=int)
        parser.add_argument("email")
        parser.add_argument("--role", required=True, choices=[r.label for r in Role])
        parser.add_argument("--password")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        workspace = Workspace.objects.filter(pk=opts["workspace_id"]).first()
        if workspace is None:
            raise CommandError(f"No workspace #{opts['workspace_id']}.")
        try:
            member = add_member(workspace, opts["email"], role=opts["role"], password=opts["password"])
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(json.dumps({"memberId": str(member.pk)}) if opts["json"] else f"Member #{member.pk} added.")
