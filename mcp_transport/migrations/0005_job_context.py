from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('mcp_transport', '0004_auth'),
    ]

    operations = [
        migrations.AddField(
            model_name='mcpjob',
            name='context',
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
