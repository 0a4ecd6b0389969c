import json

from django.core.management.base import BaseCommand

from governance.actions import create_workspace


class Command(BaseCommand):
    help = "Create a workspace with its owner (users are created on first mention)."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--owner", required=True, help="owner's email")
        parser.add_argument("--password")
        parser.add_argument("--non-retaining", action="store_true")
        parser.add_argument("--ai-memory-unavailable", action="store_true")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        workspace, owner = create_workspace(
            opts["name"],
            owner_email=opts["owner"],
            password=opts["password"],
            retains_history=not opts["non_retaining"],
            ai_memory_available=not opts["ai_memory_unavailable"],
        )
        result = {"workspaceId": str(workspace.pk), "ownerMemberId": str(owner.pk)}
        self.stdout.write(
            json.dumps(result) if opts["json"] else f"Workspace #{workspace.pk} created; owner member #{owner.pk}."
        )
