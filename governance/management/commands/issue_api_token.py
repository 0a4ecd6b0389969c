import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from governance.actions import issue_personal_token


class Command(BaseCommand):
    help = "Issue a personal token for the workspace API (Authorization: Token …). Shown once."

    def add_arguments(self, parser):
        parser.add_argument("email")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **opts):
        user = get_user_model().objects.filter(username=opts["email"].strip().lower()).first()
        if user is None:
            raise CommandError(f"No user {opts['email']}.")
        token = issue_personal_token(user)
        self.stdout.write(json.dumps({"token": token}) if opts["json"] else token)
